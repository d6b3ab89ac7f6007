"""A sweep on Kubernetes: one Job per point, or with --max-parallel one Indexed Job of all points."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_k8s_schema import assert_valid_from

from tests.conftest import wait_until
from trainlaunch.errors import UsageError
from trainlaunch.runner import get_runner
from trainlaunch.schedulers.kubernetes import sweep as k8s_sweep
from trainlaunch.schedulers.kubernetes.checks import check_manifests
from trainlaunch.schedulers.kubernetes.options import RenderOptions
from trainlaunch.settings import RankSettings
from trainlaunch.specs import AppState
from trainlaunch.sweeps import grammar as sweeps
from trainlaunch.sweeps import runs as sweep_runs


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


def _plan(
    kubeconfig: Path, max_parallel: int | None, args: list[str], version: str = "1.29", n: int = 4
) -> sweep_runs.SweepPlan:
    seeds = (1, 2) if n == 4 else (1,)
    points = sweeps.expand([sweeps.parse_param("lr=0.1,0.01")], seeds)
    cfg = {"kubeconfig": str(kubeconfig), "namespace": "team", "server_version": version}
    with get_runner("s") as runner:
        return sweep_runs.plan_sweep(
            runner, "utils.sh", args, points, "kubernetes", cfg, RankSettings(), max_parallel
        )


ECHO = ["--image", "busybox", "echo lr={lr} seed=$TRAINLAUNCH_SEED"]


def _job(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "Job")


def test_max_parallel_is_one_indexed_job_valid_against_the_schemas(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "tlhome"))
    assert _plan(kubeconfig, None, ECHO).array is None  # without a limit: one Job per point
    plan = _plan(kubeconfig, 2, ECHO)
    assert plan.array is not None and plan.array_note == ""
    docs = list(plan.array.request.resources)
    assert [d["kind"] for d in docs] == ["Job", "Service"]
    assert_valid_from(docs, (1, 29))
    assert check_manifests(docs) == []
    spec = _job(docs)["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimitPerIndex"]) == (4, 2, 0)
    assert "maxFailedIndexes" not in spec and "backoffLimit" not in spec  # no point ends another
    actions = [r["action"] for r in spec["podFailurePolicy"]["rules"]]
    assert "FailJob" not in actions and "FailIndex" in actions  # requeues exhausted: that point
    container = spec["template"]["spec"]["containers"][0]
    env = container["env"]
    assert env[0] == {
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {
            "fieldRef": {
                "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
            }
        },
    }
    values = {e["name"]: e.get("value") for e in env}
    assert values["TRAINLAUNCH_REPLICA_ID"] == "0"
    assert values["TRAINLAUNCH_APP_ID"].endswith(":$(JOB_COMPLETION_INDEX)")
    assert "TRAINLAUNCH_SEED" not in values  # per point: exported by the pod's entry
    script = container["command"][2]
    for point in plan.points:
        line = next(x for x in script.splitlines() if x.startswith(f"{point.index}) "))
        assert f"TRAINLAUNCH_SEED={point.seed}" in line
        assert f"lr={point.params['lr']} seed=" in line
    # as the CLI prints it: one request
    assert str(plan.array).count("kind: Job") == 1


def test_multi_pod_points_and_old_servers_refuse_max_parallel(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "tlhome"))
    plan = _plan(kubeconfig, 2, ["--num_replicas", "2", *ECHO])
    assert plan.array is None
    assert "point 0 runs 2 pods" in plan.array_note and "Drop --max-parallel" in plan.array_note
    plan = _plan(kubeconfig, 2, ECHO, version="1.27")
    assert plan.array is None and "server_version=1.29" in plan.array_note
    # through the CLI: one line, exit 2
    env = {**os.environ, "TRAINLAUNCH_HOME": str(tmp_path / "tlhome"), "TRAINLAUNCH_CONFIG": ""}
    out = subprocess.run(
        [sys.executable, "-m", "trainlaunch", "sweep", "-s", "kubernetes", "--cfg",
         f"kubeconfig={kubeconfig},server_version=1.29", "--max-parallel", "2",
         "--param", "lr=0.1,0.01", "--dryrun", "utils.sh", "--num_replicas", "2", *ECHO],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert (
        out.stderr.startswith("error: --max-parallel on kubernetes")
        and "Traceback" not in out.stderr
    )
    assert "runs 2 pods" in out.stderr


def test_point_status_maps_from_the_pod_of_its_index() -> None:
    job = {
        "metadata": {"name": "s-abcde-sh", "annotations": {"trainlaunch.io/role-name": "sh"}},
        "spec": {"completions": 4, "parallelism": 2},
        "status": {"completedIndexes": "0", "failedIndexes": "1"},
    }

    def pod(index: int, phase: str, state: dict[str, Any]) -> dict[str, Any]:
        return {
            "metadata": {
                "name": f"s-abcde-sh-{index}-x",
                "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
                "creationTimestamp": "2030-01-01T00:00:00Z",
            },
            "spec": {"containers": [{"name": "sh"}]},
            "status": {"phase": phase, "containerStatuses": [{"name": "sh", "state": state}]},
        }

    pods = [
        pod(0, "Succeeded", {"terminated": {"exitCode": 0}}),
        pod(1, "Failed", {"terminated": {"exitCode": 3, "reason": "Error"}}),
        pod(2, "Running", {"running": {}}),
    ]
    states = [k8s_sweep.point_status(job, pods, i) for i in range(4)]
    assert [s.state for s in states] == [
        AppState.SUCCEEDED, AppState.FAILED, AppState.RUNNING, AppState.PENDING,
    ]  # fmt: skip
    assert states[1].exit_code == 3 and "exited with code 3" in states[1].msg
    assert states[3].msg == "waiting for a free slot (--max-parallel 2)"
    assert states[2].roles[0].replicas[0].id == 0  # each point is replica 0 of its own app
    job["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:01Z"  # stopped: the rest CANCELLED
    assert k8s_sweep.point_status(job, pods, 3).state == AppState.CANCELLED
    assert k8s_sweep.parse_indexes("1,3-5,x") == {1, 3, 4, 5}
    assert k8s_sweep.split_point("team:s-abcde:3") == ("team:s-abcde", 3)
    assert k8s_sweep.split_point("team:s-abcde") == ("team:s-abcde", None)


# Each point prints who it is, then waits for the test's go file (a condition, not a sleep).
WAIT = (
    "echo lr={lr} seed=$TRAINLAUNCH_SEED id=$TRAINLAUNCH_APP_ID r=$TRAINLAUNCH_REPLICA_ID; "
    "while [ ! -e GO ]; do sleep 0.05; done; echo done {lr}"
)


def test_sweep_pods_run_k_at_a_time_and_each_point_is_a_handle(
    kubeconfig: Path,
    fake_api: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from k8s_kubelet import FakeKubelet

    from trainlaunch.cli.logs import follow_sweep

    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "tlhome"))
    go = tmp_path / "go"
    args = ["--image", "busybox", WAIT.replace("GO", str(go))]
    plan = _plan(kubeconfig, 2, args)
    assert plan.array is not None
    kubelet = FakeKubelet(fake_api).start()
    try:
        with get_runner("s", kubeconfig=str(kubeconfig)) as runner:
            handle = sweep_runs.launch(runner, plan)
            rows = sweep_runs.read_sweep(plan.sweep_id)["points"]
            handles = [r["handle"] for r in rows]
            name = plan.array.request.name
            assert handles == [f"kubernetes://s/team:{name}:{i}" for i in range(4)]
            assert handle == f"kubernetes://s/sweep:{plan.sweep_id}"

            def states() -> list[AppState]:
                return [runner.status(h).state for h in handles]

            wait_until(lambda: states()[:2] == [AppState.RUNNING] * 2, 30, what="2 running")
            assert states()[2:] == [AppState.PENDING] * 2  # the Job's parallelism holds them
            msg = runner.status(handles[3]).msg
            assert msg == "waiting for a free slot (--max-parallel 2)"
            go.touch()
            follow_sweep(runner, [(h, f"p{i}") for i, h in enumerate(handles)])
            assert states() == [AppState.SUCCEEDED] * 4
            assert (
                kubelet.max_running[
                    ("team", _job(list(plan.array.request.resources))["metadata"]["name"])
                ]
                == 2
            )
            out = capsys.readouterr().out.splitlines()
            for i, (point, h) in enumerate(zip(plan.points, handles, strict=True)):
                lr, seed = point.params["lr"], point.seed
                app_id = h.rsplit("/", 1)[1]
                assert f"[p{i}] sh/0 lr={lr} seed={seed} id={app_id} r=0" in out, out
                assert f"[p{i}] sh/0 done {lr}" in out
                lines = list(runner.log_lines(h, "sh", 0))
                assert lines == [f"lr={lr} seed={seed} id={app_id} r=0", f"done {lr}"]
                described = runner.describe(h)
                assert described is not None and f"lr={lr}" in " ".join(described.roles[0].args)
                assert described.roles[0].env["TRAINLAUNCH_SEED"] == str(seed)
            with pytest.raises(UsageError, match="cannot stop one index"):
                runner.cancel(handles[0])
            runner.cancel_many(handles)  # `stop SWEEP`: the one Job goes
            assert fake_api.names("jobs", "team") == []
            assert states() == [AppState.SUCCEEDED] * 4  # finished points keep their state
    finally:
        kubelet.stop()


def test_each_index_runs_its_own_argv_exactly_through_kubelet_and_sh(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Values with quotes, ``$(...)``, ``$$`` and spaces reach the program as written."""
    from k8s_kubelet import expand

    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "tlhome"))
    values = ["it's", "$(HOME) $$x", "a  b"]
    points = sweeps.expand([sweeps.Param("x", values=tuple(values))], (7,))
    cfg = {"kubeconfig": str(kubeconfig), "namespace": "team", "server_version": "1.33"}
    with get_runner("s") as runner:
        plan = sweep_runs.plan_sweep(
            runner, "utils.echo", ["--image", "busybox", "--msg", "<{x}>"], points,
            "kubernetes", cfg, RankSettings(), max_parallel=1,
        )  # fmt: skip
    assert plan.array is not None
    container = _job(list(plan.array.request.resources))["spec"]["template"]["spec"]
    container = container["containers"][0]
    for index, value in enumerate(values):
        env: dict[str, str] = {"HOME": "/should-not-expand"}
        for var in container["env"]:
            value_from = "valueFrom" in var
            env[var["name"]] = str(index) if value_from else expand(var["value"], env)
        argv = [expand(a, env) for a in container["command"] + container["args"]]
        out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
        assert out.stdout == f"<{value}>\n"
