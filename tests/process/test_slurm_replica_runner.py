"""The Slurm replica runner as the replica script starts it: real processes, no cluster.

``python -m trainlaunch.schedulers.slurm.replica DIR CMD...`` must write stdout.log, stderr.log
and combined.log (both streams in arrival order), exit with the command's code (128+N for a
signal), survive the SIGTERM Slurm sends every process of the step while the command decides
its own exit code, and not wait for a process the command left holding its pipes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "interleave.py"
RUNNER = [sys.executable, "-m", "trainlaunch.schedulers.slurm.replica"]


def run(tmp_path: Path, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRAINLAUNCH_REPLICA_LOG_DIR": str(tmp_path)}
    return subprocess.run(
        [*RUNNER, str(tmp_path), *cmd], capture_output=True, text=True, env=env, timeout=timeout
    )


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_both_streams_in_arrival_order_each_in_its_file(tmp_path: Path) -> None:
    proc = run(tmp_path, sys.executable, str(SCRIPT), "4")
    assert proc.returncode == 0 and proc.stdout == proc.stderr == "", proc
    assert lines(tmp_path / "combined.log") == [
        f"{s} {i}" for i in range(4) for s in ("out", "err")
    ]
    assert lines(tmp_path / "stdout.log") == [f"out {i}" for i in range(4)]
    assert lines(tmp_path / "stderr.log") == [f"err {i}" for i in range(4)]
    assert {(tmp_path / n).stat().st_mode & 0o777 for n in os.listdir(tmp_path)} == {0o600}


def test_appends_across_attempts_and_keeps_an_unterminated_line(tmp_path: Path) -> None:
    for attempt in range(2):
        code = f"import sys; print('attempt {attempt}'); sys.stderr.write('no newline')"
        assert run(tmp_path, sys.executable, "-c", code).returncode == 0
    assert lines(tmp_path / "combined.log") == [
        "attempt 0",
        "no newline",
        "attempt 1",
        "no newline",
    ]
    assert (tmp_path / "stderr.log").read_text() == "no newline" * 2  # exact bytes


def test_exit_codes_as_the_shell_reports_them(tmp_path: Path) -> None:
    assert run(tmp_path, "bash", "-c", "exit 7").returncode == 7
    assert run(tmp_path, "bash", "-c", "kill -KILL $$").returncode == 128 + signal.SIGKILL
    missing = run(tmp_path, "no-such-command-xyz")
    assert missing.returncode == 127
    assert lines(tmp_path / "stderr.log")[-1] == (
        "trainlaunch: cannot execute 'no-such-command-xyz': No such file or directory"
    )
    assert lines(tmp_path / "combined.log")[-1] == lines(tmp_path / "stderr.log")[-1]


def test_sigterm_to_the_step_the_command_decides_its_exit_code(tmp_path: Path) -> None:
    """Slurm signals every process of the step: the runner outlives it, the app exits 75."""
    app = (
        "import signal, sys, time\n"
        "def bye(*_):\n"
        "    print('saving', flush=True); print('saved', file=sys.stderr, flush=True)\n"
        "    sys.exit(75)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [*RUNNER, str(tmp_path), sys.executable, "-c", app], start_new_session=True
    )
    deadline = time.monotonic() + 30
    while "ready" not in _text(tmp_path / "combined.log"):
        assert time.monotonic() < deadline and proc.poll() is None, "the app never started"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGTERM)  # the runner and the app, as Slurm's scancel does
    assert proc.wait(timeout=30) == 75
    assert lines(tmp_path / "combined.log") == ["ready", "saving", "saved"]


def test_an_ignored_warning_signal_stays_ignored_for_the_app(tmp_path: Path) -> None:
    """The replica script's ``trap '' USR1`` reaches the app through the runner."""
    code = "import signal; print(signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN)"
    proc = subprocess.run(
        ["bash", "-c", "trap '' USR1; exec \"$@\"", "sh", *RUNNER, str(tmp_path)]
        + [sys.executable, "-c", code],
        timeout=60,
    )
    assert proc.returncode == 0
    assert lines(tmp_path / "stdout.log") == ["True"]


def test_a_straggler_holding_the_pipes_does_not_hold_the_runner(tmp_path: Path) -> None:
    cmd = ["bash", "-c", "echo started; (sleep 300 &); exit 3"]
    proc = subprocess.Popen([*RUNNER, str(tmp_path), *cmd], start_new_session=True)
    try:
        assert proc.wait(timeout=30) == 3
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the sleep (in its own session: not pytest's)
    assert lines(tmp_path / "stdout.log") == ["started"]


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""
