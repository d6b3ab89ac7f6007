"""Who holds a TCP port on this machine (Linux ``/proc``), for "the port is taken" messages."""

from __future__ import annotations

import contextlib
import os

_LISTEN = "0A"


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as f:
            next(f, None)
            for line in f:
                fields = line.split()
                if len(fields) > 9 and fields[3] == _LISTEN:
                    local_port = int(fields[1].rsplit(":", 1)[1], 16)
                    if local_port == port:
                        inodes.add(fields[9])
    return inodes


def port_holder(port: int) -> str | None:
    """'pid 1234 (python3)' for the process listening on port (None: none, or not ours to see)."""
    inodes = {f"socket:[{i}]" for i in _listening_inodes(port)}
    if not inodes:
        return None
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            fds = os.listdir(f"/proc/{pid}/fd")
            for fd in fds:
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                        with open(f"/proc/{pid}/comm", encoding="utf-8") as c:
                            return f"pid {pid} ({c.read().strip()})"
    return "another process"
