"""A sweep on Kubernetes: one Indexed Job per point, each valid against the real schemas."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_k8s_schema import assert_valid_from

from trainlaunch import sweep_runs, sweeps
from trainlaunch.runner import get_runner
from trainlaunch.schedulers.kubernetes.render import RenderOptions
from trainlaunch.settings import RankSettings


def test_four_point_sweep_renders_valid_jobs(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "tlhome"))
    points = sweeps.expand([sweeps.parse_param("lr=0.1,0.01")], (1, 2))
    cfg = {"kubeconfig": str(kubeconfig), "namespace": "team"}
    args = ["--image", "python:3.12", "train.py", "--lr", "{lr}"]
    with get_runner("s") as runner:
        plan = sweep_runs.plan_sweep(
            runner, "utils.python", args, points, "kubernetes", cfg, RankSettings()
        )
        resolved = runner.scheduler_run_opts("kubernetes").resolve(cfg, "kubernetes")
    version = RenderOptions.from_cfg(resolved, "team").server_version
    assert len(plan.infos) == 4
    assert len({info.app_id for info in plan.infos}) == 4  # one Job (set) per point
    for point, info in zip(plan.points, plan.infos, strict=True):
        docs = list(info.request.resources)
        assert_valid_from(docs, version)
        job = next(d for d in docs if d["kind"] == "Job")
        container = job["spec"]["template"]["spec"]["containers"][0]
        assert container["args"][-2:] == ["--lr", point.params["lr"]]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["TRAINLAUNCH_SEED"] == str(point.seed)
        assert info.app is not None
        assert info.app.metadata["trainlaunch"]["sweep"] == plan.sweep_id
        assert info.app.metadata["trainlaunch"]["point"]["params"] == dict(point.params)
