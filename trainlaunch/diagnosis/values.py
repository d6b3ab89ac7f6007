"""The value every backend reports for a failed app: kind, one line, the evidence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainlaunch.values import frozen

# the kinds (docs/failures.md has one section each)
OOM_KILLED = "oom_killed"  # the kernel's OOM killer (cgroup or node)
CUDA_OOM = "cuda_oom"  # torch.OutOfMemoryError
HOST_ALLOC = "host_alloc"  # an allocation on the host refused (MemoryError, RLIMIT_AS)
ABORT = "abort"  # SIGABRT: a C++ exception or assertion
SEGFAULT = "segfault"  # SIGSEGV
BUS_ERROR = "bus_error"  # SIGBUS, or DataLoader's "insufficient shared memory"
PORT_IN_USE = "port_in_use"  # EADDRINUSE
RENDEZVOUS_TIMEOUT = "rendezvous_timeout"  # ranks or nodes that never joined
MODULE_MISSING = "module_missing"  # ModuleNotFoundError (on one node only: drift)
FALLOUT = "fallout"  # a collective failed because a peer died: not the cause
STOPPED = "stopped"  # trainlaunch stop, the hang watchdog, a time limit, a preemption
KILLED = "killed"  # a signal from outside trainlaunch
EXCEPTION = "exception"  # a Python exception
EXIT_CODE = "exit_code"  # a non-zero exit without a traceback
KINDS = (
    OOM_KILLED, CUDA_OOM, HOST_ALLOC, ABORT, SEGFAULT, BUS_ERROR, PORT_IN_USE,
    RENDEZVOUS_TIMEOUT, MODULE_MISSING, FALLOUT, STOPPED, KILLED, EXCEPTION, EXIT_CODE,
)  # fmt: skip


@frozen
class Diagnosis:
    """Why an app (or one of its ranks) failed."""

    kind: str
    line: str  # one line, for a person: "rank 3 was killed by the OOM killer at 23.1 GiB ..."
    evidence: tuple[str, ...] = ()  # what it rests on, one fact per line
    rank: int | None = None  # the rank it is about (None: the app, a node)
    host: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (stable keys: the ``failure`` object of status --json)."""
        return {
            "kind": self.kind,
            "line": self.line,
            "evidence": list(self.evidence),
            "rank": self.rank,
            "host": self.host,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Diagnosis | None:
        """Inverse of to_dict; None for anything that is not one (an older record)."""
        if not isinstance(d, Mapping) or not isinstance(d.get("line"), str):
            return None
        rank = d.get("rank")
        return cls(
            kind=str(d.get("kind") or EXIT_CODE),
            line=d["line"],
            evidence=tuple(str(e) for e in d.get("evidence") or ()),
            rank=rank if isinstance(rank, int) and not isinstance(rank, bool) else None,
            host=str(d.get("host") or ""),
        )


def duration(seconds: float) -> str:
    """``45s``, ``12m``, ``2h05m``."""
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def human_bytes(n: int | float) -> str:
    """``23.1 GiB``, ``512 MiB``, ``4 KiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if size == int(size) else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


__all__ = ["KINDS", "Diagnosis", "human_bytes"]
