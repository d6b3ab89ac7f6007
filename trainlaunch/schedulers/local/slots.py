"""A file-lock semaphore: at most N apps of a slot group run at once on the local backend.

An app of a group (specs.SlotGroup: a sweep's points under ``--max-parallel``) runs only while
its supervisor holds one of N slot files (``slot<i>.lock`` in the group's directory,
``$TRAINLAUNCH_HOME/slots/<group>``) locked with ``flock``. The lock is taken by whoever starts
the supervisor (the submitting CLI, a supervisor handing its slot on, any command that finds a
free slot: queue.py) and passed to it as an inherited fd: a flock belongs to the open file
description, so the child holds it from its first instruction. The kernel drops the lock when
the last holder exits, however it ends (kill -9 included), so a slot can never leak.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def slot_spec(slots_dir: Path, count: int) -> dict[str, Any]:
    """The request's ``slots`` entry."""
    return {"dir": str(slots_dir), "count": int(count)}


def try_acquire(spec: Mapping[str, Any]) -> int | None:
    """Lock a free slot; return its (non-inheritable) fd, or None when all are taken."""
    for i in range(int(spec["count"])):
        fd = try_one(Path(spec["dir"]) / f"slot{i}.lock")
        if fd is not None:
            return fd
    return None


def busy(spec: Mapping[str, Any]) -> int:
    """How many slots are held right now (for status messages and tests)."""
    n = 0
    for i in range(int(spec["count"])):
        fd = try_one(Path(spec["dir"]) / f"slot{i}.lock")
        if fd is None:
            n += 1
        else:
            os.close(fd)
    return n


def try_one(path: Path) -> int | None:
    """Lock one slot file, or None if someone holds it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except FileNotFoundError:  # the group's first slot: slots/<group>/, both private (0700)
        for folder in (path.parent.parent, path.parent):
            folder.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


__all__ = ["busy", "slot_spec", "try_acquire", "try_one"]
