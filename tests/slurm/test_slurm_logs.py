"""`trainlaunch logs` on Slurm shows a replica's stdout and stderr in the order they happened.

Each replica runs under the replica runner (schedulers/slurm/replica.py), which writes
combined.log next to stdout.log and stderr.log, as the local backend does. The fixture
tests/fixtures/interleave.py alternates ``out i`` and ``err i`` lines and waits for each to be
recorded in combined.log before the next (tests/process/test_logs_order.py is the local twin).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slurm.conftest import wait_for
from trainlaunch.schedulers.slurm.backend import SlurmScheduler
from trainlaunch.specs import AppState

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "fixtures" / "interleave.py"


def alternating(pairs: int) -> list[str]:
    return [f"{s} {i}" for i in range(pairs) for s in ("out", "err")]


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRAINLAUNCH_CONFIG": "", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "trainlaunch", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def lines(*args: str) -> list[str]:
    proc = cli("logs", "--raw", *args, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.fixture
def script(slurm: SlurmScheduler) -> str:
    """The fixture copied into the job's working dir (the snapshot carries it)."""
    shutil.copy(SCRIPT, Path.cwd() / "interleave.py")
    return "interleave.py"


def test_logs_in_arrival_order_one_stream_on_request(slurm: SlurmScheduler, script: str) -> None:
    run = cli("run", "-s", "slurm", "--wait", "utils.python", script, "4")
    assert run.returncode == 0, run.stderr
    handle = run.stdout.strip().splitlines()[0]
    assert lines(handle) == alternating(4)
    assert lines("--stream", "stdout", handle) == [f"out {i}" for i in range(4)]
    assert lines("--stream", "stderr", handle) == [f"err {i}" for i in range(4)]
    job_id = handle.rsplit("/", 1)[1]
    job_dir = Path(slurm.describe(job_id).metadata["job_dir"])
    replica = job_dir / "interleave" / "0"
    assert (replica / "combined.log").read_text().splitlines() == alternating(4)
    assert {(replica / n).stat().st_mode & 0o777 for n in ("combined.log", "stdout.log")} == {0o600}
    # a job submitted before combined.log existed has only the two files: stdout, then stderr
    (replica / "combined.log").unlink()
    assert lines(handle) == [f"out {i}" for i in range(4)] + [f"err {i}" for i in range(4)]


def test_follow_shows_them_in_order_while_the_job_runs(slurm: SlurmScheduler, script: str) -> None:
    run = cli("run", "-s", "slurm", "utils.python", script, "5")
    assert run.returncode == 0, run.stderr
    handle = run.stdout.strip().splitlines()[0]
    assert lines("-f", handle) == alternating(5)  # ends with the job
    assert wait_for(slurm, handle.rsplit("/", 1)[1]).state == AppState.SUCCEEDED


def test_run_log_streams_them_in_order(slurm: SlurmScheduler, script: str) -> None:
    run = cli("run", "-s", "slurm", "--log", "utils.python", script, "3")
    assert run.returncode == 0, run.stderr
    shown = [ln.split(" ", 1)[1] for ln in run.stdout.splitlines() if ln.startswith("interleave/0")]
    assert shown == alternating(3)
