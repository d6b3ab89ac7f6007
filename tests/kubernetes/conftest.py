"""Fixtures for the Kubernetes backend: a fake API server on loopback and a kubeconfig for it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from k8s_fake_apiserver import CRDS, FakeApiServer  # noqa: E402
from k8s_helpers import write_kubeconfig  # noqa: E402

from trainlaunch.schedulers.kubernetes.backend import KubernetesScheduler, create_scheduler  # noqa: E402


@pytest.fixture
def fake_api() -> Iterator[FakeApiServer]:
    """A running fake API server of a cluster with JobSet, Kubeflow Trainer and Kueue."""
    server = FakeApiServer(crds=tuple(CRDS)).start()
    yield server
    server.stop()


@pytest.fixture
def kubeconfig(tmp_path: Path, fake_api: FakeApiServer) -> Path:
    """A kubeconfig pointing at fake_api, current namespace 'team'."""
    return write_kubeconfig(tmp_path / "kubeconfig", fake_api.url)


@pytest.fixture
def k8s(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[KubernetesScheduler]:
    """A kubernetes scheduler using that kubeconfig (and a private trainlaunch home)."""
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "tlhome"))
    scheduler = create_scheduler("tests", kubeconfig=str(kubeconfig))
    scheduler.poll_interval = 0.01
    yield scheduler
    scheduler.close()
