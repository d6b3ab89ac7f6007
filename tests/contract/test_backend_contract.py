"""One contract every backend honours, driven through the Runner API.

echo x2 -> SUCCEEDED, logs of each replica show the injected seed -> a sleeper -> stop ->
CANCELLED -> list shows both. Backends that cannot run here are skipped with the reason.
Kubernetes runs against the fake API server of tests/kubernetes, whose fake kubelet runs each
pod's command as a real local process (the fake sits at the HTTP boundary only), once per
target: Indexed Jobs, a JobSet, a TrainJob (the fake kubelet plays their controllers).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from trainlaunch.runner import get_runner
from trainlaunch.settings import RankSettings
from trainlaunch.specs import AppDef, AppState, Role


def slurm_available() -> str | None:
    """None when a Slurm cluster answers, else the reason it does not."""
    if shutil.which("sinfo") is None:
        return "sinfo not installed (scripts/slurm-dev-cluster start installs and starts one)"
    try:
        ok = subprocess.run(["sinfo", "-h"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return None if ok else "no Slurm cluster answers (scripts/slurm-dev-cluster start)"


BACKENDS = [
    "local",
    pytest.param("slurm", marks=pytest.mark.slurm),
    "kubernetes",
    "kubernetes-jobset",
    "kubernetes-trainjob",
]
IMAGE = "docker.io/library/bash:5"
KUBERNETES_TESTS = Path(__file__).resolve().parents[1] / "kubernetes"


@pytest.fixture(params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """The backend's name, the scheduler params the runner needs for it and its options."""
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    if request.param == "slurm":
        reason = slurm_available()
        if reason:
            if os.environ.get("TRAINLAUNCH_REQUIRE_SLURM"):
                pytest.fail(f"Slurm is required here but unavailable: {reason}")
            pytest.skip(reason)
        # the job dir must be on the filesystem the emulated nodes share: this machine's
        monkeypatch.chdir(tmp_path)
    if not request.param.startswith("kubernetes"):
        yield str(request.param), {}, {}
        return
    monkeypatch.syspath_prepend(str(KUBERNETES_TESTS))
    from k8s_fake_apiserver import FakeApiServer
    from k8s_helpers import write_kubeconfig
    from k8s_kubelet import FakeKubelet

    from trainlaunch.schedulers.kubernetes.trainjob import runtime_manifest

    api = FakeApiServer(crds=("jobsets", "trainjobs", "clustertrainingruntimes")).start()
    api.put("clustertrainingruntimes", runtime_manifest())
    kubelet = FakeKubelet(api).start()
    target = request.param.partition("-")[2] or "job"
    try:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url)
        cfg = {"api": target, "runtime": "trainlaunch"}
        yield "kubernetes", {"kubeconfig": str(kubeconfig)}, cfg
    finally:
        kubelet.stop()
        api.stop()


def test_backend_contract(backend: tuple[str, dict[str, Any], dict[str, Any]]) -> None:
    backend, params, cfg = backend
    echo = AppDef(
        "echo",
        [
            Role(
                "echo",
                "bash",
                ("-c", "echo seed=$TRAINLAUNCH_SEED replica=$TRAINLAUNCH_REPLICA_ID"),
                image=IMAGE,  # only Kubernetes uses it
                num_replicas=2,
            )
        ],
    )
    sleeper = AppDef("sleeper", [Role("sleeper", "sleep", ("600",), image=IMAGE)])
    with get_runner(**params) as runner:
        h1 = runner.run(echo, backend, cfg, rank_settings=RankSettings(seed=1234))
        final = runner.wait(h1, timeout=180)
        assert final.state == AppState.SUCCEEDED, final
        for k in (0, 1):
            lines = list(runner.log_lines(h1, "echo", k))
            assert f"seed=1234 replica={k}" in lines, lines
        h2 = runner.run(sleeper, backend, cfg)
        wait_until(
            lambda: runner.status(h2).state == AppState.RUNNING,
            timeout=120,
            what="the sleeper to run",
        )
        runner.cancel(h2)
        assert runner.status(h2).state == AppState.CANCELLED
        listed = {r.app_handle: r.state for r in runner.list_apps(backend)}
        assert listed.get(h1) == AppState.SUCCEEDED
        assert listed.get(h2) == AppState.CANCELLED
