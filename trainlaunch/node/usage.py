"""What one process uses now, read from /proc (Linux; None elsewhere or once it is gone)."""

from __future__ import annotations

import os

from trainlaunch.node.processes import stat_fields
from trainlaunch.values import frozen

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@frozen
class Usage:
    """CPU time so far (user + system, seconds) and resident memory (bytes)."""

    cpu_s: float
    rss: int


def usage(pid: int | None) -> Usage | None:
    """The process's CPU time and resident memory (None: no such process, or no /proc)."""
    if not pid or pid <= 0:
        return None
    fields = stat_fields(pid)
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            statm = f.read()
    except OSError:
        return None
    if fields is None:
        return None
    try:
        cpu = (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
        rss = int(statm.split()[1]) * _PAGE
    except (IndexError, ValueError):
        return None
    return Usage(cpu, rss)


__all__ = ["Usage", "usage"]
