"""Kubernetes handles carry their session like every backend's (the pods' TRAINLAUNCH_HANDLE)."""

from __future__ import annotations

from pathlib import Path

import pytest
from k8s_fake_apiserver import FakeApiServer
from k8s_helpers import echo_app

from trainlaunch.errors import AppNotFound
from trainlaunch.runner import get_runner


def test_a_handle_of_another_session_is_not_found(
    kubeconfig: Path, fake_api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    with get_runner("exp1", kubeconfig=str(kubeconfig)) as runner:
        handle = runner.run(echo_app(1), "kubernetes")
    assert handle.startswith("kubernetes://exp1/team:")
    app_id = handle.rsplit("/", 1)[1]
    with get_runner(kubeconfig=str(kubeconfig)) as runner:
        assert runner.status(handle).state.name == "PENDING"  # any runner reads it by handle
        with pytest.raises(AppNotFound, match="in session 'trainlaunch'") as e:
            runner.describe_app(f"kubernetes://trainlaunch/{app_id}")  # the raising variant
        assert e.value.hint == f"its handle is {handle}"
        assert runner.status(f"kubernetes://trainlaunch/{app_id}") is None  # the seed's
        with pytest.raises(AppNotFound):
            runner.cancel_many([f"kubernetes://trainlaunch/{app_id}"])
        runner.cancel(f"kubernetes://trainlaunch/{app_id}")  # the seed's: not here, nothing
        assert fake_api.names("jobs", "team")  # the wrong handle stopped nothing
