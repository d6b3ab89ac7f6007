"""Stack dumps of an app's ranks: the values, py-spy's JSON parsed, grouped and rendered.

Pure (no I/O): the backends collect one :class:`RankStack` per rank (``dump.py`` runs
py-spy), this module groups ranks whose stacks are identical so the odd one out is obvious::

    ranks 0,2-3: all_reduce at train.py:41
    rank 1: <module> at train.py:33
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from trainlaunch.ranklist import parse_rank_list, rank_list
from trainlaunch.values import frozen

# where a frame counts as library code (the headline names the innermost frame outside it)
_LIBRARY_MARKS = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen ")

RUNNING, EXITED, ERROR = "running", "exited", "error"


@frozen
class Frame:
    """One Python (or native) frame: function name, file and line."""

    name: str
    filename: str
    line: int = 0

    @property
    def short_file(self) -> str:
        """The file's base name (as shown in headlines)."""
        return self.filename.rsplit("/", 1)[-1]

    @property
    def is_library(self) -> bool:
        """Whether the frame lies in an installed package or the standard library."""
        return any(m in self.filename for m in _LIBRARY_MARKS) or not self.filename.endswith(".py")

    def text(self) -> str:
        """``name (file:line)``."""
        return f"{self.name} ({self.filename}:{self.line})" if self.line else self.name


@frozen
class ThreadStack:
    """The frames of one thread, innermost first."""

    name: str
    frames: tuple[Frame, ...]
    thread_id: int = 0
    active: bool = True

    def key(self) -> tuple[Any, ...]:
        """What must be equal for two threads to count as the same stack."""
        return (self.name, tuple((f.name, f.filename, f.line) for f in self.frames))


@frozen
class RankStack:
    """Where one rank is: its threads, or why there is no stack (exited, error)."""

    rank: int
    state: str = RUNNING  # running | exited | error
    threads: tuple[ThreadStack, ...] = ()
    pid: int | None = None
    host: str = ""
    role: str = ""
    replica_id: int | None = None
    exit_code: int | None = None
    error: str = ""
    recorder: Mapping[str, Any] | None = None  # its Flight Recorder dump (stacks/recorder.py)
    recorder_error: str = ""  # why there is none, when one was asked for

    def key(self) -> tuple[Any, ...]:
        """Ranks with equal keys are shown as one group."""
        if self.state == EXITED:
            return (EXITED, self.exit_code)
        if self.state == ERROR:
            return (ERROR, self.error)
        return (RUNNING, tuple(t.key() for t in self.threads))

    def headline(self) -> str:
        """One line: ``all_reduce at train.py:41``, ``exited with code 1``, or the error."""
        if self.state == EXITED:
            code = "unknown code" if self.exit_code is None else f"code {self.exit_code}"
            return f"exited with {code}"
        if self.state == ERROR:
            return f"no stack: {self.error}"
        return headline(self.threads)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view (stable keys)."""
        return {
            "rank": self.rank,
            "state": self.state,
            "pid": self.pid,
            "host": self.host,
            "role": self.role,
            "replica_id": self.replica_id,
            "exit_code": self.exit_code,
            "error": self.error,
            **({"recorder": self.recorder} if self.recorder is not None else {}),
            **({"recorder_error": self.recorder_error} if self.recorder_error else {}),
            "threads": [
                {
                    "name": t.name,
                    "thread_id": t.thread_id,
                    "active": t.active,
                    "frames": [dataclasses.asdict(f) for f in t.frames],
                }
                for t in self.threads
            ],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RankStack:
        """Inverse of to_dict (as written in a hang dump)."""
        threads = tuple(
            ThreadStack(
                str(t.get("name", "")),
                tuple(
                    Frame(str(f["name"]), str(f["filename"]), int(f["line"])) for f in t["frames"]
                ),
                int(t.get("thread_id") or 0),
                bool(t.get("active", True)),
            )
            for t in d.get("threads") or []
        )
        return cls(
            rank=int(d["rank"]),
            state=str(d.get("state", RUNNING)),
            threads=threads,
            pid=d.get("pid"),
            host=str(d.get("host") or ""),
            role=str(d.get("role") or ""),
            replica_id=d.get("replica_id"),
            exit_code=d.get("exit_code"),
            error=str(d.get("error") or ""),
            recorder=d.get("recorder") if isinstance(d.get("recorder"), Mapping) else None,
            recorder_error=str(d.get("recorder_error") or ""),
        )


@frozen
class StackGroup:
    """Ranks whose stacks are identical, shown once."""

    ranks: tuple[int, ...]
    stack: RankStack  # the first rank's (all are equal up to pid and host)
    hosts: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``rank 1`` or ``ranks 0,2-7``."""
        return ("rank " if len(self.ranks) == 1 else "ranks ") + rank_list(self.ranks)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view."""
        d = self.stack.to_dict()
        for k in ("rank", "pid", "host", "replica_id", "recorder", "recorder_error"):
            d.pop(k, None)
        return {
            "ranks": list(self.ranks),
            "hosts": list(self.hosts),
            "headline": self.stack.headline(),
            **d,
        }


def parse_pyspy_json(text: str) -> tuple[ThreadStack, ...]:
    """Threads from ``py-spy dump --json`` output (frames innermost first); ValueError if odd."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"py-spy printed no JSON: {e}") from None
    if not isinstance(data, list):
        raise ValueError("py-spy printed JSON that is not a list of threads")
    threads = []
    for t in data:
        frames = tuple(
            Frame(
                str(f.get("name") or "?"),
                str(f.get("filename") or f.get("short_filename") or "?"),
                int(f.get("line") or 0),
            )
            for f in t.get("frames") or []
        )
        # py-spy may not know thread names: the main thread is the one whose id is the pid's
        main = t.get("os_thread_id") is not None and t.get("os_thread_id") == t.get("pid")
        name = t.get("thread_name") or ("MainThread" if main else "thread")
        threads.append(
            ThreadStack(
                str(name), frames, int(t.get("thread_id") or 0), bool(t.get("active", True))
            )
        )
    # the main thread first, then by name: stable keys whatever order py-spy reports
    threads.sort(key=lambda t: (t.name != "MainThread", t.name))
    return tuple(threads)


def headline(threads: Sequence[ThreadStack]) -> str:
    """``fn at file.py:line`` for the main thread: its innermost frame, located in user code.

    The innermost frame says *what* the rank does (``all_reduce``); the innermost frame outside
    installed packages says *where* in the user's code (``train.py:41``).
    """
    if not threads:
        return "no Python threads"
    frames = threads[0].frames
    if not frames:
        return f"{threads[0].name}: no Python frames"
    inner = frames[0]
    where = next((f for f in frames if not f.is_library), inner)
    return f"{inner.name} at {where.short_file}:{where.line}"


def group(stacks: Iterable[RankStack]) -> list[StackGroup]:
    """Ranks with identical stacks together; the smallest groups (the odd ones) first."""
    by_key: dict[tuple[Any, ...], list[RankStack]] = {}
    for s in sorted(stacks, key=lambda s: s.rank):
        by_key.setdefault(s.key(), []).append(s)
    groups = [
        StackGroup(
            tuple(s.rank for s in members),
            members[0],
            tuple(sorted({s.host for s in members if s.host})),
        )
        for members in by_key.values()
    ]
    groups.sort(key=lambda g: (len(g.ranks), g.ranks))
    return groups


def summary_lines(groups: Sequence[StackGroup]) -> list[str]:
    """One line per group: ``ranks 0,2-3: all_reduce at train.py:41``."""
    return [f"{g.label}: {g.stack.headline()}" for g in groups]


def render_text(groups: Sequence[StackGroup], full: bool = True) -> str:
    """The grouped dump: each group's headline, then (full) its threads, innermost first."""
    lines: list[str] = []
    for g in groups:
        hosts = f"  [{', '.join(g.hosts)}]" if g.hosts and full else ""
        lines.append(f"{g.label}: {g.stack.headline()}{hosts}")
        if not full:
            continue
        for t in g.stack.threads:
            lines.append(f"    Thread {t.name}" + ("" if t.active else " (idle)"))
            lines.extend(f"        {f.text()}" for f in t.frames)
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def document(stacks: Sequence[RankStack], taken: float) -> dict[str, Any]:
    """The JSON document of ``stack --json`` and of a hang dump."""
    groups = group(stacks)
    return {
        "taken": taken,
        "groups": [g.to_dict() for g in groups],
        "ranks": [s.to_dict() for s in sorted(stacks, key=lambda s: s.rank)],
    }


__all__ = [
    "ERROR",
    "EXITED",
    "RUNNING",
    "Frame",
    "RankStack",
    "StackGroup",
    "ThreadStack",
    "document",
    "group",
    "headline",
    "parse_pyspy_json",
    "parse_rank_list",
    "rank_list",
    "render_text",
    "summary_lines",
]
