"""A file-lock semaphore: at most N apps of a sweep run at once on the local backend.

Every point of a sweep is submitted at once; its supervisor takes one of N slot files
(``slot<i>.lock`` in the sweep's directory) with a non-blocking ``flock`` before it starts any
replica, and holds it until it exits. The kernel drops the lock when the supervisor exits,
however it ends (kill -9 included), so a slot can never leak and no queue owner can die. Order
is first come, first served among the waiting supervisors (roughly submission order).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

POLL_S = 0.25  # how often a waiting supervisor retries (a stop request wakes it at once)


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
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


__all__ = ["POLL_S", "busy", "slot_spec", "try_acquire", "try_one"]
