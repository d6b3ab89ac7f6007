"""Starting an app's detached supervisor: what the submitting CLI and a supervisor handing on
its slot (queue.py) both do."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from trainlaunch import store
from trainlaunch.errors import SchedulerError, StoreError
from trainlaunch.node import processes

if TYPE_CHECKING:
    import subprocess


SLOT_FD = "--slot-fd"  # the supervisor's argument naming the inherited fd of its slot lock


def start_supervisor(path: Path, cwd: str, slot_fd: int | None = None) -> subprocess.Popen[bytes]:
    """Start the detached supervisor of the app in path (its output goes to supervisor.log);
    slot_fd: a locked slot (slots.py) the supervisor inherits and holds until it ends."""
    import subprocess  # submission only: status/list/logs skip it

    try:
        fd = os.open(path / "supervisor.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError as e:
        raise StoreError(f"cannot write {path / 'supervisor.log'}: {e.strerror or e}") from None
    with os.fdopen(fd, "ab") as log:
        try:
            argv = [sys.executable, "-m", "trainlaunch.schedulers.local.supervisor", str(path)]
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


def record_supervisor(path: Path, proc: subprocess.Popen[bytes]) -> None:
    """Write supervisor.json (who owns the app) and let the process go (never waited for)."""
    store.write_json(
        path / "supervisor.json",
        {
            "pid": proc.pid,
            "ticks": processes.start_ticks(proc.pid),
            "boot_id": processes.boot_id(),
        },
    )
    proc.returncode = 0  # detached on purpose: never waited for by this process


__all__ = ["SLOT_FD", "record_supervisor", "start_supervisor"]
