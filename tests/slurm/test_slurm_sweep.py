"""A sweep on the real Slurm cluster: one job per point, each its own handle; stop stops all."""

from __future__ import annotations

import json
import subprocess
import sys

from trainlaunch.schedulers.slurm.backend import SlurmScheduler


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainlaunch", *args], capture_output=True, text=True, timeout=180
    )


def test_sweep_points_are_jobs_and_stop_stops_every_one(slurm: SlurmScheduler) -> None:
    out = _cli("sweep", "-s", "slurm", "--param", "t=300,301", "utils.sh", "sleep {t}")
    assert out.returncode == 0, out.stderr
    handle = out.stdout.strip()
    assert handle.startswith("slurm://") and "/sweep:" in handle
    points = json.loads(_cli("status", handle, "--json").stdout)["points"]
    assert [p["params"] for p in points] == [{"t": "300"}, {"t": "301"}]
    for p in points:  # every element is an ordinary handle
        assert p["handle"].startswith("slurm://")
        one = _cli("status", "--json", p["handle"])
        assert one.returncode == 0 and json.loads(one.stdout)["state"] in ("PENDING", "RUNNING")
    stopped = _cli("stop", handle)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith(f"{handle}\tCANCELLED=2"), stopped.stdout
    assert _cli("wait", handle).returncode == 6


def test_max_parallel_is_refused_on_slurm(slurm: SlurmScheduler) -> None:
    out = _cli("sweep", "-s", "slurm", "--max-parallel", "1", "--seeds", "1,2", "utils.sh", "true")
    assert out.returncode == 2 and "local backend only" in out.stderr
