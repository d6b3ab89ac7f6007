"""Ctrl-C's end of a Slurm job as status tells it, and the batch script's guard against
retrying or requeueing it (schedulers/slurm/interrupt.py; tests/slurm/ runs it for real)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from trainlaunch.schedulers.slurm import interrupt
from trainlaunch.schedulers.slurm.attempts import end_lines
from trainlaunch.specs import AppState, AppStatus, ReplicaStatus, RoleStatus


def _status(state: AppState, *replicas: AppState) -> AppStatus:
    reps = tuple(ReplicaStatus(id=i, role="t", state=s) for i, s in enumerate(replicas))
    return AppStatus(
        state=state, exit_code=130, msg="exit code 130", roles=(RoleStatus("t", reps),)
    )


def test_an_interrupted_job_is_cancelled_not_failed() -> None:
    st = interrupt.as_interrupted(_status(AppState.FAILED, AppState.FAILED, AppState.SUCCEEDED))
    assert (st.state, st.msg, st.exit_code) == (AppState.CANCELLED, "interrupted (Ctrl-C)", 130)
    assert [r.state for r in st.replicas()] == [AppState.CANCELLED, AppState.SUCCEEDED]
    done = _status(AppState.SUCCEEDED, AppState.SUCCEEDED)
    assert interrupt.as_interrupted(done) is done  # it ended well before the signal came
    running = _status(AppState.RUNNING, AppState.RUNNING)
    assert interrupt.as_interrupted(running) is running  # the ranks are still handling it
    assert interrupt.failure().line.startswith("interrupted by Ctrl-C (scancel --signal=INT")


def _decide(job_dir: Path, rc: int) -> str:
    """The action the batch script's end takes for an attempt that exited rc."""
    (job_dir / "attempts").write_text("attempt=0 start=1\n")
    lines = [
        f"trainlaunch_job_dir={job_dir}",
        "trainlaunch_term=0",
        f"trainlaunch_rc={rc}",
        'scontrol() { echo "scontrol $*"; }',
        "squeue() { :; }",
        *end_lines(max_retries=3, max_requeues=3),
    ]
    out = subprocess.run(["bash", "-c", "\n".join(lines)], capture_output=True, text=True)
    return (job_dir / "attempts").read_text() + out.stdout


def test_the_batch_script_neither_retries_nor_requeues_an_interrupted_attempt(
    tmp_path: Path,
) -> None:
    assert "action=retry" in _decide(tmp_path, 130)  # a failure is retried
    interrupt.mark(tmp_path)
    assert (tmp_path / interrupt.INTERRUPTED_FILE).stat().st_mode & 0o777 == 0o600
    ended = _decide(tmp_path, 130)
    assert "action=end" in ended and "requeue" not in ended, ended
    assert "action=end" in _decide(tmp_path, 75)  # nor is a requeue asked for then
    interrupt.mark(tmp_path)  # a second Ctrl-C: marked already, not an error
    assert interrupt.marked(tmp_path) and not interrupt.marked(None)
