"""Starting an app's detached supervisor: what the submitting CLI and a supervisor handing on
its slot (queue.py) both do.

``run`` starts the supervisor's interpreter while it still resolves the component (a *warm*
supervisor: :func:`warm_supervisor`, ``python -m trainlaunch.schedulers.local.supervisor
--app-from-fd N``): the interpreter's start and the supervisor's imports (~40 ms) overlap the
CLI's own work, and :func:`start_supervisor` then hands it the app through the pipe on fd N.
A warm supervisor that gets no app (the CLI failed, or queued the app) reads end-of-file and
exits without a trace; the CLI also stops and reaps one it did not use before it exits
(:meth:`WarmSupervisor.discard`), so no process outlives the command that had no app for it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the rest is imported where used: `prefetch` runs before the CLI's imports
    import subprocess
    from pathlib import Path


SLOT_FD = "--slot-fd"  # the supervisor's argument naming the inherited fd of its slot lock
APP_FROM_FD = "--app-from-fd"  # a warm supervisor's: the pipe its app's directory comes on
MODULE = "trainlaunch.schedulers.local.supervisor"
LOG_FILE = "supervisor.log"


class WarmSupervisor:
    """A supervisor's interpreter, started before its app exists; the write end of its pipe."""

    def __init__(self, proc: subprocess.Popen[bytes], pipe: int) -> None:
        self.proc = proc
        self.pipe = pipe

    def hand(self, path: Path, cwd: str) -> bool:
        """Give it the app in path (cwd: its working directory); False if it is gone."""
        message = f"{path}\0{cwd}".encode()
        try:
            written = os.write(self.pipe, message)  # far below PIPE_BUF: one write, all of it
        except OSError:  # EPIPE: it died before it read (a broken install, a kill)
            written = 0
        finally:
            os.close(self.pipe)
        if written != len(message):
            self.discard(closed=True)
            return False
        return True

    def discard(self, closed: bool = False) -> None:
        """Stop and reap it (it was given no app), and remove the cgroup it made to wait in."""
        from trainlaunch.node import appgroup

        if not closed:
            with contextlib.suppress(OSError):
                os.close(self.pipe)
        cgroup = appgroup.supervisor_name(self.proc.pid)  # while its start time can be read
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()
        appgroup.remove_named(cgroup)


def warm_supervisor() -> WarmSupervisor | None:
    """Start a supervisor that waits for its app (None if it cannot be started: the app will
    get a supervisor of its own when it is submitted)."""
    import subprocess  # submission only: status/list/logs skip it

    read, write = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", MODULE, APP_FROM_FD, str(read)],
            pass_fds=(read,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # until it has its app: then its supervisor.log
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,  # its working directory: the app's, once it has it (await_app)
        )
    except OSError:
        os.close(write)
        return None
    finally:
        os.close(read)
    return WarmSupervisor(proc, write)


_prefetched: list[WarmSupervisor] = []  # prefetch()'s, until the local backend takes it


def prefetch() -> None:
    """Start the warm supervisor of this process's coming `run` now (trainlaunch/__main__.py
    calls it before the CLI imports click: ~40 ms earlier than Runner.warm_up can); the local
    backend's warm_up takes it (take_prefetched), and what none took is stopped at the
    process's end (drop_prefetched)."""
    if not _prefetched and (warm := warm_supervisor()) is not None:
        _prefetched.append(warm)


def take_prefetched() -> WarmSupervisor | None:
    """The prefetched warm supervisor, if any (once)."""
    return _prefetched.pop() if _prefetched else None


def drop_prefetched() -> None:
    """Stop and reap the prefetched supervisor if nothing took it."""
    warm = take_prefetched()
    if warm is not None:
        warm.discard()


def start_supervisor(
    path: Path, cwd: str, slot_fd: int | None = None, warm: WarmSupervisor | None = None
) -> subprocess.Popen[bytes]:
    """Start the detached supervisor of the app in path (its output goes to supervisor.log);
    slot_fd: a locked slot (slots.py) the supervisor inherits and holds until it ends; warm:
    a supervisor already started (warm_supervisor, never with slot_fd), handed the app
    instead if it still runs."""
    import subprocess  # submission only: status/list/logs skip it

    from trainlaunch.errors import SchedulerError, StoreError

    try:
        fd = _open_log(str(path))
    except OSError as e:
        if warm is not None:
            warm.discard()
        raise StoreError(f"cannot write {path / LOG_FILE}: {e.strerror or e}") from None
    with os.fdopen(fd, "ab") as log:
        if warm is not None and warm.hand(path, cwd):
            return warm.proc
        try:
            argv = [sys.executable, "-m", MODULE, str(path)]
            return subprocess.Popen(
                argv + ([SLOT_FD, str(slot_fd)] if slot_fd is not None else []),
                pass_fds=() if slot_fd is None else (slot_fd,),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
                cwd=cwd if os.path.isdir(cwd) else None,
            )
        except OSError as e:
            raise SchedulerError(f"cannot start the supervisor: {e}") from None


def await_app(fd: int) -> str:
    """A warm supervisor's wait for its app: the app's directory, once its supervisor.log is
    this process's output and cwd its working directory ('' when the CLI gave none)."""
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    path, _, cwd = b"".join(chunks).decode().partition("\0")
    if not path:
        return ""
    log = _open_log(path)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    if os.path.isdir(cwd):
        os.chdir(cwd)
    return path


def _open_log(app_dir: str) -> int:
    """The supervisor's own output: its app's supervisor.log, appended to, private."""
    return os.open(os.path.join(app_dir, LOG_FILE), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


def record_supervisor(path: Path, proc: subprocess.Popen[bytes]) -> None:
    """Write supervisor.json (who owns the app) and let the process go (never waited for)."""
    from trainlaunch import store
    from trainlaunch.node import processes

    store.write_json(
        path / "supervisor.json",
        {
            "pid": proc.pid,
            "ticks": processes.start_ticks(proc.pid),
            "boot_id": processes.boot_id(),
        },
    )
    proc.returncode = 0  # detached on purpose: never waited for by this process


__all__ = [
    "APP_FROM_FD",
    "SLOT_FD",
    "WarmSupervisor",
    "await_app",
    "drop_prefetched",
    "prefetch",
    "take_prefetched",
    "record_supervisor",
    "start_supervisor",
    "warm_supervisor",
]
