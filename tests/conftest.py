"""Shared fixtures: a private app store per test, and the real CLI two ways.

The rule for a new test (docs/development.md says it at length):

* ``inprocess_cli``: the CLI's entry function (``trainlaunch.cli.boundary.main``) called in
  this process, about 5 ms a call instead of 0.3 s for a new interpreter. Use it for what
  starts no process of its own: usage errors, ``--help``/``--version``, ``--dryrun``,
  completion, and read-only commands on a store that is already there. It returns what
  ``cli`` returns (a CompletedProcess), so assertions read the same.
* ``cli``: ``python -m trainlaunch`` in a subprocess, where a real process matters: starting
  apps, signals, pipes, ``sys.modules`` checks, ``PYTHONPATH``, and each kind of exit code at
  least once. Both fixtures share one store and working directory; a test may take both.
* Markers (pyproject.toml): ``slow`` for a test over ~5 s on a busy 2-core machine (measure
  with ``--durations=0``); ``slurm`` for the real cluster (set by itself on every test that
  takes ``slurm_nodes``); ``pod_simulation`` for the pods simulated with root and unshare;
  ``serial`` for a test that must have the machine to itself. The fast tier is
  ``python -m pytest -n auto -m "not slow and not slurm"``; the whole suite (CI) is
  ``python -m pytest -n auto``.
"""

from __future__ import annotations

import contextlib
import fcntl
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

from tests.inprocess import environment, main_in_process

# pytest-xdist's workers export COLUMNS=80 and LINES=24, which a user's shell does not: the
# programs the tests start in a terminal (Textual, a rank's shutil.get_terminal_size) would
# take them over the terminal's own size
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


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
        proc = self.execute(args, {**self.env, **(env or {})}, cwd or self.cwd, input, timeout)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"trainlaunch {' '.join(args)} -> {proc.returncode}\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def execute(
        self, args: Sequence[str], env: dict[str, str], cwd: Path, input: str | None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """One call of the CLI: a new interpreter."""
        return subprocess.run(
            [sys.executable, "-m", "trainlaunch", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=cwd,
            input=input,
        )

    def run(self, *args: str) -> str:
        """`trainlaunch run ...`; return the handle."""
        out = self("run", *args, check=True).stdout.strip()
        assert out.startswith("local://"), out
        return out

    def status(self, handle: str) -> dict[str, Any]:
        """`trainlaunch status --json`."""
        return json.loads(self("status", "--json", handle, check=True).stdout)

    def wait(self, handle: str, timeout: float = 60) -> dict[str, Any]:
        """Poll status until terminal; a timeout says where the app stood (status, log tail)."""
        try:
            return wait_until(
                lambda: (s := self.status(handle))["is_terminal"] and s,
                timeout=timeout,
                what=f"{handle} to end",
            )
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.where(handle)}") from None

    def where(self, handle: str) -> str:
        """What a timed-out test shows of an app: its status and the tail of its logs."""
        status = self("status", "--json", handle, timeout=30)
        logs = self("logs", handle, timeout=30)
        tail = "\n".join(logs.stdout.splitlines()[-60:])
        return f"status: {status.stdout}{status.stderr}\nlogs (tail):\n{tail}\n{logs.stderr}"

    def popen(self, *args: str, **kw: Any) -> subprocess.Popen[str]:
        """Start the CLI without waiting."""
        return subprocess.Popen(
            [sys.executable, "-m", "trainlaunch", *args],
            env=self.env,
            cwd=self.cwd,
            text=True,
            **kw,
        )


class InProcessCLI(CLI):
    """The same calls as CLI, through the CLI's entry function in this process (no interpreter
    to start: ~5 ms a call instead of ~0.3 s). For what starts no process: see the top."""

    def execute(
        self, args: Sequence[str], env: dict[str, str], cwd: Path, input: str | None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """One call of the CLI: boundary.main in this process (pytest-timeout bounds it)."""
        for k in {*env, *os.environ}:  # what only a new interpreter would read
            if k.startswith("PYTHON") and env.get(k) != os.environ.get(k):
                raise ValueError(f"{k} is read by a new interpreter only: use the `cli` fixture")
        with environment(env, cwd):
            return main_in_process(args, input)

    def popen(self, *args: str, **kw: Any) -> subprocess.Popen[str]:
        """Refused: a CLI that runs alongside the test (signals, pipes) is a real process."""
        raise TypeError("inprocess_cli cannot start the CLI in the background: use `cli`")


@pytest.fixture
def inprocess_cli(tmp_path: Path) -> Iterator[InProcessCLI]:
    """Like `cli` (same store layout under tmp_path), through boundary.main in this process."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)  # shared with cli when a test takes both
    yield InProcessCLI(home, work)
    reap_store(home)


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[CLI]:
    """A CLI bound to a fresh app store under tmp_path; whatever still runs against the store
    when the test ends (a failed assertion before its `stop`) is killed."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)  # shared with inprocess_cli when a test takes both
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


# --- tiers and parallel runs (the rule is at the top of this file and in docs/development.md) --

# A test that takes one of these fixtures needs what the marker says, wherever it lives.
MARK_BY_FIXTURE = {"slurm_nodes": "slurm"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the markers added here count
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests by the fixtures they use; put every Slurm test on one xdist worker (the
    cluster is shared: two jobs asking for both nodes would only queue behind each other);
    give a serial test time to wait for the machine."""
    for item in items:
        for fixture, mark in MARK_BY_FIXTURE.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(mark)
        if item.get_closest_marker("slurm"):
            item.add_marker(pytest.mark.xdist_group("slurm"))
        if item.get_closest_marker("serial") and not item.get_closest_marker("timeout"):
            # pytest-timeout counts the setup, where a serial test waits for the tests already
            # running on the other workers to end (each within the 300 s timeout)
            item.add_marker(pytest.mark.timeout(600))


@pytest.fixture(autouse=True)
def machine_share(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """`serial` tests run alone: an exclusive lock that every other test shares, across the
    workers of one `pytest -n N` run (their temporary directories have one parent).

    Every test passes a gate first, and a serial test keeps it while it waits for the lock:
    otherwise the other workers' tests, each taking the shared lock before the last let go,
    could keep it from a waiting serial test for ever (290 s at `-n 4`, seen on 2026-12-07).
    """
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    exclusive = request.node.get_closest_marker("serial") is not None
    with open(root / "serial.gate", "a") as gate, open(root / "serial.lock", "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield
