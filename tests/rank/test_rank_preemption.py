"""trainlaunch.rank.preemption in a real process: a warning sets the flag, the callback runs
once, requeue() exits 75, restart_count() reads the backend's variable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

SCRIPT = r"""
import os, signal, sys, time
from trainlaunch.rank import preemption
assert not preemption.requested() and preemption.received() is None
seen = []
preemption.on_request(lambda sig: seen.append(sig.name))
os.kill(os.getpid(), getattr(signal, sys.argv[1]))
os.kill(os.getpid(), signal.SIGTERM)  # a second warning: no second callback, no exit
deadline = time.monotonic() + 10
while not preemption.requested() and time.monotonic() < deadline:
    time.sleep(0.01)
print(preemption.received().name, seen, preemption.restart_count(), flush=True)
preemption.requeue()
"""


def _run(sig: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, sig],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


def test_usr1_warning_then_requeue_exit_75() -> None:
    proc = _run("SIGUSR1", {"TRAINLAUNCH_RESTART_COUNT": "2"})
    assert proc.returncode == 75, proc.stderr
    assert proc.stdout.strip() == "SIGUSR1 ['SIGUSR1'] 2"


def test_sigterm_is_a_warning_once_installed() -> None:
    proc = _run("SIGTERM", {"TRAINLAUNCH_RESTART_COUNT": ""})
    assert proc.returncode == 75, proc.stderr
    assert proc.stdout.strip() == "SIGTERM ['SIGTERM'] 0"


def test_nothing_is_installed_until_asked() -> None:
    code = "from trainlaunch.rank import preemption; import os, signal; os.kill(os.getpid(), signal.SIGUSR1)"
    proc = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert proc.returncode == -signal.SIGUSR1
