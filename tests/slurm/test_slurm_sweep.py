"""Sweeps on the real Slurm cluster: one job array (``--array=0-N%K``), every element its own
handle ``slurm://SESSION/JOB_i``; stop stops every element; the compare table has a row each."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import wait_until
from trainlaunch.schedulers.slurm.backend import SlurmScheduler
from trainlaunch.schedulers.slurm.status import parse_squeue

pytestmark = pytest.mark.slurm
FIXTURE = Path(__file__).parent.parent / "fixtures" / "sweep" / "train_tiny.py"
LRS = ("0.3", "0.1", "0.03")
DEADLINE_S = 240.0  # the dev cluster is shared: elements may wait for free CPUs


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainlaunch", *args], capture_output=True, text=True, timeout=180
    )


def _points(handle: str) -> list[dict]:
    out = _cli("status", handle, "--json")
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)["points"]


def _array_states(job_id: str) -> dict[str, str]:
    """What squeue says about the array's elements, from outside trainlaunch."""
    proc = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%i|%T|%j|%r|%N"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return {k: v.state for k, v in parse_squeue(proc.stdout).items()}


@pytest.mark.slow  # 6 elements, 2 at a time, each a few seconds; the cluster is shared
def test_array_runs_at_most_two_at_once_and_compares(slurm: SlurmScheduler) -> None:
    out = _cli(
        "sweep", "-s", "slurm", "--param", f"lr={','.join(LRS)}", "--seeds", "1,2",
        "--max-parallel", "2",
        "utils.python", str(FIXTURE), "--lr", "{lr}", "--steps", "4", "--step-time", "1",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "job array" not in out.stderr  # no fallback note: the points are one array
    handle = out.stdout.strip()
    points = _points(handle)
    handles = [p["handle"] for p in points]
    job_id = handles[0].rsplit("/", 1)[1].split("_")[0]
    assert handles == [f"slurm://trainlaunch/{job_id}_{i}" for i in range(6)]
    assert [(p["params"]["lr"], p["seed"]) for p in points] == [
        (lr, s) for lr in LRS for s in (1, 2)
    ]
    # from outside: squeue never shows more than 2 running elements
    seen_running, seen_queued = 0, False
    deadline = time.monotonic() + DEADLINE_S
    while True:
        states = _array_states(job_id)
        running = [k for k, s in states.items() if s == "RUNNING"]
        assert len(running) <= 2, states
        seen_running = max(seen_running, len(running))
        seen_queued |= len(running) == 2 and "PENDING" in states.values()
        if all(p["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") for p in _points(handle)):
            break
        assert time.monotonic() < deadline, states
        time.sleep(0.2)
    assert seen_running == 2 and seen_queued  # the limit was reached and others waited
    assert _cli("wait", handle).returncode == 0
    assert _cli("status", handle).stdout.startswith(f"{handle}\tSUCCEEDED=6")
    rows = json.loads(_cli("list", "--sweep", handle.rsplit(":", 1)[1], "--json").stdout)
    assert [r["state"] for r in rows["points"]] == ["SUCCEEDED"] * 6

    assert _cli("wait", handles[0]).returncode == 0
    for i, (h, p) in enumerate(zip(handles, points, strict=True)):  # each element on its own
        desc = json.loads(_cli("describe", h, "--json").stdout)
        job_dir = Path(desc["metadata"]["job_dir"])
        assert job_dir.name == f"{job_id}_{i}" and (job_dir / "batch.log").is_file()
        assert desc["app"]["metadata"]["trainlaunch"]["point"]["seed"] == p["seed"]
        logs = _cli("logs", h)
        assert logs.returncode == 0, logs.stderr
        assert f"seed={p['seed']} lr={float(p['params']['lr'])} final loss=" in logs.stdout

    table = json.loads(_cli("metrics", handle, "--json").stdout)["apps"]
    assert [r["handle"] for r in table] == handles
    for row, p in zip(table, points, strict=True):
        own = json.loads(_cli("metrics", p["handle"], "--json").stdout)
        assert row["last"]["loss"] == own["latest"]["0"]["loss"]
        assert row["params"] == {"lr": p["params"]["lr"], "seed": p["seed"]}
        assert row["steps"] == 4


def test_array_elements_stop_alone_and_stop_sweep_stops_all(slurm: SlurmScheduler) -> None:
    out = _cli(
        "sweep", "-s", "slurm", "--param", "t=300,301,302", "--max-parallel", "2",
        "utils.sh", "echo element {t}; sleep {t}",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    handle = out.stdout.strip()
    assert handle.startswith("slurm://") and "/sweep:" in handle
    handles = [p["handle"] for p in _points(handle)]
    job_id = handles[0].rsplit("/", 1)[1].split("_")[0]

    def state(h: str) -> str:
        return json.loads(_cli("status", "--json", h).stdout)["state"]

    wait_until(
        lambda: all(state(h) == "RUNNING" for h in handles[:2]), DEADLINE_S, 0.2, "2 running"
    )
    assert _array_states(job_id)[f"{job_id}_2"] == "PENDING"  # held back by %2
    wait_until(
        lambda: "element 300" in _cli("logs", handles[0]).stdout, DEADLINE_S, 0.2, "its output"
    )
    stopped = _cli("stop", handles[0])  # one element: scancel JOB_0
    assert stopped.returncode == 0, stopped.stderr
    assert state(handles[0]) == "CANCELLED" and state(handles[1]) == "RUNNING"

    stopped = _cli("stop", handle)  # the whole array: scancel JOB
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith(f"{handle}\tCANCELLED=3"), stopped.stdout
    live = {k: s for k, s in _array_states(job_id).items() if s in ("PENDING", "RUNNING")}
    assert not live, live
    assert _cli("wait", handle).returncode == 6


def test_unequal_resources_fall_back_to_one_job_per_point(slurm: SlurmScheduler) -> None:
    args = ("--param", "n=1,2", "dist.ddp", "--nnodes", "{n}", "train.py")
    out = _cli("sweep", "-s", "slurm", "--dryrun", *args)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip() == (
        "note: one slurm job per point, not a job array: "
        "its points ask for different resources (point 1: --nodes=2)"
    )
    assert "--array" not in out.stdout and out.stdout.count("#!/bin/bash") == 2
    refused = _cli("sweep", "-s", "slurm", "--max-parallel", "1", *args)
    assert refused.returncode == 2 and "cannot be one job array" in refused.stderr


def test_dryrun_shows_the_array_and_each_element_point(slurm: SlurmScheduler) -> None:
    args = ("--seeds", "1,2,3", "--max-parallel", "2", "utils.sh", "echo {seed}")
    out = _cli("sweep", "-s", "slurm", "--dryrun", *args)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    lines = out.stdout.splitlines()
    assert lines[:3] == [f"# element {i}: seed={i + 1}" for i in range(3)]
    assert out.stdout.count("#!/bin/bash") == 1 and "#SBATCH --array=0-2%2" in lines
    assert all(f"bash -c 'echo {i}'" in out.stdout for i in (1, 2, 3))
    doc = json.loads(_cli("sweep", "-s", "slurm", "--dryrun", "--json", *args).stdout)
    assert "#SBATCH --array=0-2%2" in doc["array"] and len(doc["points"]) == 3
    assert not list((Path.cwd().parent / "home" / "slurm").glob("index/*.json"))  # nothing sent
