"""Ctrl-C on a Slurm app reaches its ranks as SIGINT, as torchrun passes it on (issue 22 #23;
schedulers/slurm/interrupt.py): `scancel --signal=INT` to the job's steps, each node agent
forwards it, the ranks' ``except KeyboardInterrupt`` runs; the attempt is neither retried nor
requeued, and the app ends CANCELLED as interrupted. Before, the ranks got SIGTERM (`stop`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI, wait_until
from tests.slurm.conftest import JOB_TIMEOUT_S
from trainlaunch.components.dist import ddp
from trainlaunch.runner import get_runner
from trainlaunch.schedulers.slurm.backend import SlurmScheduler
from trainlaunch.specs import AppState

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "tests" / "fixtures" / "ddp" / "interrupted.py")  # "rank N ready", waits


def _ready(pid_dir: Path, n: int) -> None:
    wait_until(
        lambda: len(list(pid_dir.glob("*.pid"))) == n, timeout=JOB_TIMEOUT_S, what="ranks ready"
    )


def test_an_interrupt_gives_the_ranks_sigint_and_ends_the_job_cancelled(
    slurm: SlurmScheduler, tmp_path: Path
) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    env = {"PID_DIR": str(pid_dir), "PYTHONPATH": str(REPO)}
    # a retry is allowed: an interrupted attempt must not use it
    app = ddp(SCRIPT, nproc_per_node="2", env=env, max_retries=1)
    with get_runner() as runner:
        handle = runner.run(app, "slurm", {})
        _ready(pid_dir, 2)
        runner.cancel(handle, interrupt=True)
        st = runner.status(handle)
        described = runner.describe_app(handle)
        text = "\n".join(runner.log_lines(handle, "interrupted", 0))
    assert st is not None and st.state == AppState.CANCELLED, (st, text)
    assert st.msg == "interrupted (Ctrl-C)", st
    assert [r.state for r in st.replicas()] == [AppState.CANCELLED]
    for rank in (0, 1):
        assert f"rank {rank} KeyboardInterrupt handled" in text, text
    assert "SIGTERM" not in text, text
    assert len(st.attempts) == 1, st.attempts  # not retried
    assert described.failure is not None
    assert described.failure.line.startswith("interrupted by Ctrl-C (scancel --signal=INT")


def test_ctrl_c_on_run_wait_interrupts_the_slurm_job(slurm: SlurmScheduler, tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    cli = CLI(Path(os.environ["TRAINLAUNCH_HOME"]), Path.cwd())
    argv = [sys.executable, "-m", "trainlaunch", "run", "--wait", "-s", "slurm"]
    argv += ["dist.ddp", "--env", f"PID_DIR={pid_dir},PYTHONPATH={REPO}", "--nproc-per-node"]
    proc = subprocess.Popen(
        [*argv, "2", SCRIPT],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _ready(pid_dir, 2)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the foreground group
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    handle = out.split()[0]
    status = cli.status(handle)
    assert status["state"] == "CANCELLED", status
    logs = cli("logs", handle, check=True).stdout
    assert "rank 1 KeyboardInterrupt handled" in logs, logs
