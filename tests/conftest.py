"""Shared fixtures: a private app store per test and a real CLI in a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 30.0,
    interval: float = 0.02,
    what: str = "condition",
) -> Any:
    """Poll predicate until it returns a truthy value; fail the test after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class CLI:
    """Runs `python -m trainlaunch ...` against one app store."""

    def __init__(self, home: Path, cwd: Path) -> None:
        self.home = home
        self.cwd = cwd
        self.env = {
            **os.environ,
            "TRAINLAUNCH_HOME": str(home),
            "TRAINLAUNCH_CONFIG": "",
            "XDG_CONFIG_HOME": str(home / "xdg-config"),
        }
        for k in list(self.env):
            if k.startswith(
                (
                    "TRAINLAUNCH_SEED",
                    "TRAINLAUNCH_EXPORT",
                    "TRAINLAUNCH_METRICS",
                    "TRAINLAUNCH_SCHEDULER",
                    "PET_",
                )
            ):
                del self.env[k]

    def __call__(
        self,
        *args: str,
        check: bool = False,
        timeout: float = 120,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "trainlaunch", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**self.env, **(env or {})},
            cwd=cwd or self.cwd,
            input=input,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"trainlaunch {' '.join(args)} -> {proc.returncode}\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def run(self, *args: str) -> str:
        """`trainlaunch run ...`; return the handle."""
        out = self("run", *args, check=True).stdout.strip()
        assert out.startswith("local://"), out
        return out

    def status(self, handle: str) -> dict[str, Any]:
        """`trainlaunch status --json`."""
        return json.loads(self("status", "--json", handle, check=True).stdout)

    def wait(self, handle: str, timeout: float = 60) -> dict[str, Any]:
        """Poll status until terminal."""
        return wait_until(
            lambda: (s := self.status(handle))["is_terminal"] and s,
            timeout=timeout,
            what=f"{handle} to end",
        )

    def popen(self, *args: str, **kw: Any) -> subprocess.Popen[str]:
        """Start the CLI without waiting."""
        return subprocess.Popen(
            [sys.executable, "-m", "trainlaunch", *args],
            env=self.env,
            cwd=self.cwd,
            text=True,
            **kw,
        )


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[CLI]:
    """A CLI bound to a fresh app store under tmp_path; whatever still runs against the store
    when the test ends (a failed assertion before its `stop`) is killed."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    yield CLI(home, work)
    reap_store(home)


def pids_alive(pids: Sequence[int]) -> list[int]:
    """The pids that still exist as non-zombie processes."""
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            alive.append(pid)
    return alive


def processes_with_env(name: str, value: str) -> list[int]:
    """Pids of live processes whose environment has name=value (the process table)."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env and pids_alive([int(entry)]):
            found.append(int(entry))
    return found


def reap_store(home: Path) -> None:
    """SIGKILL every process started against this store (supervisors, replicas, CLIs).

    Tests assert on leftovers themselves; this only keeps a failing test from leaking
    processes into the next one (or past the end of the run).
    """
    for pid in processes_with_env("TRAINLAUNCH_HOME", str(home)):
        if pid == os.getpid():
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


# Tests send SIGINT and SIGHUP to the CLIs they start, as a terminal would. A runner started
# as `nohup ... &` (or `cmd &` in a script) ignores both, and its children would inherit that
# (the CLI keeps what it inherited as ignored, docs/cli.md): give them the terminal's defaults.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
