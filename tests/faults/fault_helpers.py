"""Helpers shared by the reliability, security, fuzz and load suites.

Everything here works on real processes and the real app store: pids from the records the
supervisor writes, signal masks from /proc, a tmpfs for a full or read-only disk, and the CLI
either in a subprocess (tests/conftest.py's ``cli``) or in-process through the one error
boundary (``trainlaunch.cli.boundary.main``: ``inprocess_cli``, ``run_inprocess``), which is
~50x faster for fuzzing.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI, pids_alive, processes_with_env, reap_store, wait_until
from tests.inprocess import environment, main_in_process
from trainlaunch.errors import ExitCode

EXIT_CODES = {int(c) for c in ExitCode}


# --- records --------------------------------------------------------------------------------


def app_id_of(handle: str) -> str:
    """The app id at the end of a handle."""
    return handle.rsplit("/", 1)[1]


def app_dir(cli: CLI, handle: str) -> Path:
    """The app's directory in the store."""
    return cli.home / "apps" / app_id_of(handle)


def read_record(path: Path) -> dict[str, Any]:
    """A JSON record of the store."""
    return json.loads(path.read_text())


def write_record(path: Path, data: Any) -> None:
    """Replace a record the way the store does (so readers never see half of it)."""
    tmp = path.with_name(f".{path.name}.test.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def supervisor_pid(cli: CLI, handle: str) -> int:
    """The supervisor's pid as the CLI recorded it at launch."""
    return int(read_record(app_dir(cli, handle) / "supervisor.json")["pid"])


def running_replicas(
    cli: CLI, handle: str, count: int, timeout: float = 30.0
) -> list[dict[str, Any]]:
    """Wait until state.json shows `count` RUNNING replicas with pids; return their records."""
    path = app_dir(cli, handle) / "state.json"

    def ready() -> list[dict[str, Any]] | None:
        try:
            reps = read_record(path)["replicas"]
        except (OSError, ValueError, KeyError):
            return None
        live = [r for r in reps if r.get("state") == "RUNNING" and r.get("pid")]
        return live if len(live) == count else None

    return wait_until(ready, timeout=timeout, what=f"{count} running replica(s) of {handle}")


def app_processes(handle: str) -> list[int]:
    """Live processes that carry the app's id in their environment (replicas and children)."""
    return processes_with_env("TRAINLAUNCH_APP_ID", app_id_of(handle))


def wait_processes(handle: str, count: int, timeout: float = 30.0) -> list[int]:
    """Wait until at least `count` processes of the app exist; return them."""

    def enough() -> list[int] | None:
        found = app_processes(handle)
        return found if len(found) >= count else None

    return wait_until(enough, timeout=timeout, what=f"{count} process(es) of {handle}")


def kill9(pid: int) -> None:
    """SIGKILL a process and wait until it is gone (or a zombie)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not pids_alive([pid]), timeout=10, what=f"pid {pid} to die")


def start_ticks(pid: int) -> int:
    """The process start time in clock ticks (field 22 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return int(data[data.rfind(b")") + 2 :].split()[19])


# --- signals --------------------------------------------------------------------------------


def catches(pid: int, sig: int) -> bool:
    """True once the process has a handler installed for sig (SigCgt in /proc/PID/status)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (sig - 1)))
    except OSError:
        return False
    return False


def wait_catches(pid: int, sig: int, timeout: float = 30.0) -> None:
    """Poll until pid handles sig: the way to know a CLI reached its waiting loop."""
    wait_until(
        lambda: catches(pid, sig),
        timeout=timeout,
        what=f"pid {pid} to install a {signal.Signals(sig).name} handler",
    )


def sleeping(pid: int) -> bool:
    """True while the process sits in a timed sleep, per its wchan: Python's time.sleep, or
    runner/polling.py's nap (sigtimedwait for SIGCHLD, with a timeout)."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            where = f.read().strip()
            return where in ("hrtimer_nanosleep", "do_nanosleep") or where.startswith(
                "do_sigtimedwait"
            )
    except OSError:
        return False


def wait_sleeping(pid: int, timeout: float = 30.0) -> None:
    """Poll until pid is in a timed sleep: a polling loop (such as `wait`'s) has been reached."""
    wait_until(
        lambda: sleeping(pid),
        timeout=timeout,
        interval=0.005,
        what=f"pid {pid} to reach a polling loop",
    )


class LineReader:
    """Reads a pipe line by line on a thread, so a test can wait for output with a deadline."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._q: queue.Queue[str | None] = queue.Queue()
        self._t = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._t.start()

    def _pump(self, stream: Any) -> None:
        for line in stream:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def _drain(self) -> None:
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                self.lines.append(item)

    def wait_for(self, predicate: Any, timeout: float = 30.0, what: str = "output") -> str:
        """The first line satisfying predicate (lines seen so far included)."""

        def found() -> str | None:
            self._drain()
            return next((ln for ln in self.lines if predicate(ln)), None)

        return wait_until(found, timeout=timeout, what=what)

    def rest(self, timeout: float = 10.0) -> list[str]:
        """Every line once the stream has ended."""
        self._t.join(timeout)
        self._drain()
        return self.lines


# --- cleanup --------------------------------------------------------------------------------


@pytest.fixture
def reaper(cli: CLI) -> CLI:
    """The cli fixture (which kills anything left running against its store at teardown)."""
    return cli


# --- disks ----------------------------------------------------------------------------------


def mount_tmpfs(path: Path, size: str) -> None:
    """Mount a private tmpfs on path (mode 0700: a 1777 root would be refused as shared)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN)")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"mount -t tmpfs not permitted here: {proc.stderr.strip()}")


def remount(path: Path, opts: str) -> None:
    """mount -o remount,OPTS (e.g. ro, rw)."""
    subprocess.run(["mount", "-o", f"remount,{opts}", str(path)], check=True, capture_output=True)


def umount(path: Path) -> None:
    """Lazy unmount (a process may still hold a file open)."""
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill_disk(directory: Path) -> Path:
    """Write a filler file until the filesystem is full (ENOSPC); return it."""
    vfs = os.statvfs(directory)
    if vfs.f_blocks * vfs.f_frsize > 64 << 20:  # never fill a real disk by mistake
        raise RuntimeError(f"refusing to fill {directory}: not a small test filesystem")
    filler = directory / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (65536, 4096, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)
    return filler


@pytest.fixture
def tmpfs_home(reaper: CLI) -> Iterator[CLI]:
    """A cli whose store ($TRAINLAUNCH_HOME) is its own 512 KiB tmpfs."""
    mount_tmpfs(reaper.home, "512k")
    try:
        yield reaper
    finally:
        reap_store(reaper.home)
        umount(reaper.home)


# --- the CLI in-process ---------------------------------------------------------------------


@contextlib.contextmanager
def cli_env(home: Path, cwd: Path, extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """os.environ without trainlaunch's variables, a private store and cwd (restored after)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINLAUNCH_", "PET_"))}
    environ |= {
        "TRAINLAUNCH_HOME": str(home),
        "TRAINLAUNCH_CONFIG": "",
        "XDG_CONFIG_HOME": str(home.parent / "xdg-config"),
        **(extra or {}),
    }
    with environment(environ, cwd):
        yield


def run_inprocess(argv: Sequence[str]) -> tuple[int, str, str]:
    """The CLI's boundary in this process (tests/conftest.py): (exit code, stdout, stderr)."""
    proc = main_in_process(argv)
    return proc.returncode, proc.stdout, proc.stderr


def check_clean_exit(
    argv: Sequence[str], code: int, stderr: str, allowed: set[int] | None = None
) -> None:
    """The contract of every command: a documented code, no traceback, at most one error line."""
    where = f"argv={list(argv)!r}\nexit={code}\nstderr:\n{stderr}"
    assert code in EXIT_CODES, f"exit code not in ExitCode\n{where}"
    assert code != ExitCode.INTERNAL, f"internal error (a bug)\n{where}"
    assert "Traceback" not in stderr, f"traceback on stderr\n{where}"
    assert sum(1 for ln in stderr.splitlines() if ln.startswith("error:")) <= 1, where
    if allowed is not None:
        assert code in allowed, f"exit code not in {sorted(allowed)}\n{where}"
    if code not in (0, ExitCode.INTERRUPTED):
        assert stderr.strip(), f"failed silently\n{where}"


def elapsed(t0: float) -> float:
    """Seconds since t0 (monotonic)."""
    return time.monotonic() - t0
