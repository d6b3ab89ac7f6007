"""`logs` of a dist.ddp app on Kubernetes (the real client, the fake API server): each pod's
agent console read back into ranks, lines every rank wrote shown once (logmerge)."""

from __future__ import annotations

from pathlib import Path

import pytest
from k8s_fake_apiserver import FakeApiServer

from components.dist import ddp
from trainlaunch.cli.logs import stream_all
from trainlaunch.runner import get_runner

RUNNING = {"running": {"startedAt": "2030-01-01T00:00:05Z"}}


def test_two_pods_of_two_ranks_merge(
    kubeconfig: Path,
    fake_api: FakeApiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "tlhome"))
    app = ddp("train.py", nnodes="2", nproc_per_node="2", image="pytorch/pytorch", name="t")
    with get_runner("s", kubeconfig=str(kubeconfig)) as runner:
        handle = runner.schedule(runner.dryrun(app, "kubernetes"))
        job = f"{handle.rsplit(':', 1)[1]}-t"
        for node in (0, 1):
            pod = fake_api.add_pod("team", job, node, "Succeeded", RUNNING)
            lines = [f"[default{lr}]:Epoch 1: starting" for lr in (0, 1)]
            lines += [f"[default{lr}]:loss {node * 2 + lr}" for lr in (0, 1)]
            lines += [f"[default{lr}]:" for lr in (0, 1)]
            fake_api.logs[("team", pod)].write("\n".join(lines) + "\n")
        stream_all(runner, handle, follow=False, merge="exact")
    out = capsys.readouterr().out.splitlines()
    assert out.count("[t ranks 0-3] Epoch 1: starting") == 1
    assert sorted(ln for ln in out if "loss" in ln) == [
        "[t/0 rank 0] loss 0",
        "[t/0 rank 1] loss 1",
        "[t/1 rank 2] loss 2",
        "[t/1 rank 3] loss 3",
    ]
    assert "" in out and not any(
        ln.strip().startswith("[t") and ln.strip().endswith("]") for ln in out
    )
