"""What a node can tell about how a process died: its cgroup's OOM kills and memory limit,
the kernel log's OOM lines, /dev/shm, who holds a port (torch-free, stdlib, Linux; anything
unreadable is None or empty, never an error). The node agent and the local supervisor read it
when a rank fails; trainlaunch/diagnosis turns it into one line.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from trainlaunch.values import frozen

CGROUP_ROOT = Path("/sys/fs/cgroup")
_UNLIMITED = 1 << 62  # cgroup v1 says "no limit" with a number near 2**63
KMSG_MAX_RECORDS = 200_000  # the kernel's ring buffer, read once (a few MiB at most)


@frozen
class MemoryCgroup:
    """A process's memory cgroup (v1's memory controller, or v2's unified one)."""

    dir: Path
    v2: bool
    root: Path  # the controller's mount point (limits are looked up to it)

    def oom_kills(self) -> int | None:
        """How many processes the OOM killer killed in this cgroup (and below, on v2)."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            text = (self.dir / name).read_text()
        except OSError:
            return None
        m = re.search(r"^oom_kill (\d+)$", text, re.M)
        return int(m[1]) if m else None

    def limit(self) -> tuple[int, Path] | None:
        """The smallest memory limit from this cgroup up to the root, and where it is set."""
        name = "memory.max" if self.v2 else "memory.limit_in_bytes"
        best: tuple[int, Path] | None = None
        d = self.dir
        while True:
            with contextlib.suppress(OSError, ValueError):
                raw = (d / name).read_text().strip()
                if raw != "max" and int(raw) < _UNLIMITED and (best is None or int(raw) < best[0]):
                    best = (int(raw), d)
            if d == self.root or d.parent == d:
                return best
            d = d.parent

    def peak(self) -> int | None:
        """The cgroup's peak memory use (v1 max_usage_in_bytes, v2 memory.peak)."""
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        try:
            return int((self.dir / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


def memory_cgroup(pid: int | str = "self") -> MemoryCgroup | None:
    """The memory cgroup of a process (None: none readable)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    unified = ""
    for line in lines:
        hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if "memory" in controllers.split(","):
            root = CGROUP_ROOT / "memory"
            d = root / path.lstrip("/")
            if d.is_dir():
                return MemoryCgroup(d, False, root)
        if hid == "0" and not controllers:
            unified = path
    for root in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        d = root / unified.lstrip("/")
        if (d / "memory.events").is_file():
            return MemoryCgroup(d, True, root)
    return None


def node_memory() -> int | None:
    """The node's memory (MemTotal) in bytes."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def kernel_oom_lines(pid: int) -> tuple[list[str], str]:
    """The kernel log's OOM-killer lines about pid, and why none could be read ('' if read)."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        return [], f"the kernel log is not readable ({e.strerror or e})"
    needles = (f"Killed process {pid} ", f",pid={pid},")
    found: list[str] = []
    try:
        for _ in range(KMSG_MAX_RECORDS):
            try:
                rec = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as e:  # EPIPE: the buffer wrapped under us; go on reading
                if e.errno == 32:
                    continue
                break
            text = rec.decode("utf-8", "replace").split(";", 1)[-1].strip()
            if any(n in text for n in needles):
                found.append(text)
    finally:
        os.close(fd)
    return found, ""


def shm_size() -> tuple[int, int] | None:
    """/dev/shm's (size, free) in bytes (None: no /dev/shm)."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def port_holder(port: int) -> str:
    """``pid 1234 (python -m http.server 29500)`` listening on port ('' when not visible)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{f[9]}]")
    if not inodes:
        return ""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry.name}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{entry.name}/fd/{fd}") in inodes:
                    return f"pid {entry.name} ({_cmdline(entry.name)})"
            except OSError:
                continue
    return "a process this user cannot see"


def _cmdline(pid: str) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    text = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    return text if len(text) <= 80 else text[:77] + "..."


__all__ = [
    "MemoryCgroup",
    "kernel_oom_lines",
    "memory_cgroup",
    "node_memory",
    "port_holder",
    "shm_size",
]
