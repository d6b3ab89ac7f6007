"""node/processes.py: the one liveness rule and the one stop-with-grace, on real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import wait_until
from trainlaunch.node import processes


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return data[data.rfind(b")") + 2 :].split()[0].decode()


def test_a_zombie_is_not_alive_and_a_reaped_pid_is_gone() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_until(lambda: _state(proc.pid) == "Z", timeout=10, what="the child to exit")
    assert not processes.alive(proc.pid)  # exited, not reaped yet
    assert processes.group_alive(os.getpgrp())
    proc.wait()
    assert not processes.alive(proc.pid)
    assert processes.alive(os.getpid())
    assert not processes.alive(None) and not processes.alive(0) and not processes.alive(-1)


def test_a_recorded_process_is_alive_only_with_its_start_time() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ticks = processes.start_ticks(proc.pid)
        assert processes.same_process_alive(proc.pid, ticks)
        assert not processes.same_process_alive(proc.pid, (ticks or 0) + 1)  # a reused pid
        assert not processes.same_process_alive(proc.pid, None)
    finally:
        proc.kill()
        proc.wait()


def test_a_group_is_alive_while_a_signal_reaches_it() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:
        assert processes.group_alive(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not processes.group_alive(proc.pid)


def _group(code: str) -> subprocess.Popen[bytes]:
    """A child leading its own process group, ready once it printed a line."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import signal, sys, time\n{code}\nprint('ready', flush=True)\ntime.sleep(600)",
        ],
        start_new_session=True,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return proc


def test_a_process_that_ends_on_sigterm_gets_no_sigkill() -> None:
    proc = _group("")
    left = processes.stop_with_grace(
        [proc.pid], 600, alive=lambda _: proc.poll() is None, kill_wait=600
    )
    assert left == [] and proc.returncode == -signal.SIGTERM


def test_one_that_ignores_it_is_killed_after_the_grace_period() -> None:
    proc = _group("signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    left = processes.stop_with_grace(
        [proc.pid], 0.2, alive=lambda _: proc.poll() is None, kill_wait=600
    )
    assert left == [] and proc.returncode == -signal.SIGKILL


def test_a_second_signal_cuts_the_grace_period_short() -> None:
    proc = _group("signal.signal(signal.SIGINT, signal.SIG_IGN)")
    left = processes.stop_with_grace(
        [proc.pid],
        600,  # never waited for: cut_short says so at once
        sig=signal.SIGINT,
        alive=lambda _: proc.poll() is None,
        cut_short=lambda: True,
        kill_wait=600,
    )
    assert left == [] and proc.returncode == -signal.SIGKILL


EXIT_CHECK = r"""
import atexit, sys, threading
from trainlaunch.node.processes import exit_at_once
mode = sys.argv[1]
sys.stdout.write("buffered, not yet flushed")  # no newline: still in the buffer
if mode == "atexit":
    atexit.register(lambda: sys.stdout.write(" and the callback ran"))
if mode == "thread":
    def late():  # ends once the main thread has (the normal exit's shutdown), never before
        threading.main_thread().join()
        sys.stdout.write(" and the thread finished")
        sys.stdout.flush()
    threading.Thread(target=late).start()
exit_at_once(3)
"""


@pytest.mark.parametrize(
    ("mode", "out"),
    [
        ("plain", "buffered, not yet flushed"),
        ("atexit", "buffered, not yet flushed and the callback ran"),
        ("thread", "buffered, not yet flushed and the thread finished"),
    ],
)
def test_exit_at_once_flushes_and_runs_what_is_left_to_run(mode: str, out: str) -> None:
    """The output is never lost; a registered callback or a live thread gets the normal exit."""
    proc = subprocess.run(
        [sys.executable, "-c", EXIT_CHECK, mode], capture_output=True, text=True, check=False
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, out, "")
