"""A signal in the CLI's first moments (issue 23 #13): exit 130 with one line, nothing left.

The CLI's signal handlers are its first lines (trainlaunch/__main__.py), before click and the
rest of trainlaunch are imported (0.1-0.2 s here). Each try starts a real CLI, polls until
those lines have run (the SIGTERM bit of SigCgt in /proc/PID/status: nothing of trainlaunch's
can answer a signal before it), then signals it a spread of delays later, so that the signal
lands in the imports, in the command's work, or after it has ended. The delays are what is
tested, not a way to wait for something. Before the fix: a traceback and exit 1 or -2 for
SIGINT, -15 for SIGTERM (the probe: 6/12).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from tests.conftest import CLI, processes_with_env
from tests.faults.fault_helpers import wait_catches

DELAYS_MS = [0, 1, 3, 10, 20, 40, 70, 100, 150, 200]
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def _signalled(cli: CLI, args: list[str], sig: int, delay_ms: int) -> tuple[int, str, str, bool]:
    """Run the CLI, signal it delay_ms after its handlers exist: (code, stdout, stderr, landed:
    whether the signal reached it before it had exited)."""
    proc = cli.popen(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_catches(proc.pid, signal.SIGTERM, timeout=30)
        deadline = time.monotonic() + delay_ms / 1000
        while time.monotonic() < deadline:  # spin, not sleep: a 1 ms delay must be 1 ms
            pass
        landed = proc.poll() is None
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err, landed


def _check_one_line(code: int, err: str, where: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, f"{where}: a traceback\n{err}"
    assert len(lines) <= 1, f"{where}: more than one line on stderr\n{err}"
    if code == 130:
        assert lines == [] or "interrupted" in lines[0], f"{where}\n{err}"


def _tries(repeat: int) -> list[tuple[int, int]]:
    return [(sig, d) for sig in SIGNALS for d in DELAYS_MS for _ in range(repeat)]


@pytest.mark.parametrize(
    "repeat", [pytest.param(1, id="once"), pytest.param(3, id="x3", marks=pytest.mark.slow)]
)
def test_a_signal_in_the_first_moments_of_a_query_is_exit_130_and_one_line(
    cli: CLI, repeat: int
) -> None:
    handle = cli.run("utils.echo", "--msg", "hi")
    cli.wait(handle)
    landed = 0
    for sig, delay in _tries(repeat):
        code, out, err, reached = _signalled(cli, ["status", handle], sig, delay)
        where = f"status + {signal.Signals(sig).name} at {delay} ms: exit {code}"
        _check_one_line(code, err, where)
        if code == 0:  # it had printed the status and ended when the signal came
            assert handle in out, where
            continue
        assert code == 130, f"{where}\n{err}"
        landed += reached
    assert landed >= len(_tries(repeat)) // 2, f"only {landed} signals landed in the command"


@pytest.mark.parametrize(
    "repeat", [pytest.param(1, id="once"), pytest.param(3, id="x3", marks=pytest.mark.slow)]
)
def test_a_signal_in_the_first_moments_of_run_leaves_no_app_without_a_handle(
    cli: CLI, repeat: int
) -> None:
    """An interrupted `run` exits 130; an app whose handle it did not print is stopped."""
    landed, stopped = 0, 0
    for sig, delay in _tries(repeat):
        before = _apps(cli)
        code, out, err, reached = _signalled(cli, ["run", "utils.sh", "sleep 300"], sig, delay)
        where = f"run + {signal.Signals(sig).name} at {delay} ms: exit {code}"
        _check_one_line(code, err, where)
        assert code in (0, 130), f"{where}\n{err}"
        landed += code == 130 and reached
        new = {h: s for h, s in _apps(cli).items() if h not in before}
        printed = out.strip()
        if printed:  # the handle was printed: the app is the user's to stop
            assert list(new) == [printed], where
            cli("stop", printed, check=True)
            continue
        assert all(s == "CANCELLED" for s in new.values()), f"{where}: {new}"
        stopped += len(new)
    assert processes_with_env("TRAINLAUNCH_HOME", str(cli.home)) == []
    assert landed >= len(_tries(repeat)) // 2, f"only {landed} signals landed in the command"


def _apps(cli: CLI) -> dict[str, str]:
    """handle -> state of every app in the store."""
    rows = json.loads(cli("list", "--json", check=True).stdout)
    return {r["handle"]: r["state"] for r in rows}
