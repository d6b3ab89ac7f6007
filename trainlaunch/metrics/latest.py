"""The latest values per rank for a view that reads the same metrics files every refresh.

``summary.read_latest`` reads each file backwards until every metric has been seen: one record
when MetricLogger's sidecar lists the names, the whole file without one. `top` and `ui` ask
again every few seconds, so :class:`LatestFiles` remembers, per file, the latest values up to
the end of its last complete line and the file's identity (device, inode): a file whose size
and mtime did not change costs one ``stat``, a file that grew costs the lines appended since
(parsed forwards, a later record's value winning, exactly as the backwards read takes the
newest), and a file replaced, cut short, or grown by more than :data:`MAX_APPEND` is read again
as ``read_latest`` reads it. An unterminated last line (a write in progress) is parsed for this
reading only; the file is read on from the start of that line next time.

Entries are never changed once stored, so views in several threads (`ui`) may share one.
"""

from __future__ import annotations

import os
import stat
from typing import Any, NamedTuple

from trainlaunch.metrics.reader import (
    MAX_LINE_BYTES,
    MetricsData,
    RankKey,
    rank_of,
    revive,
)
from trainlaunch.metrics.summary import HEADER_FIELDS, file_latest, parse_record, read_latest

MAX_APPEND = 4 << 20  # more appended since the last reading: read the file's end again instead
MAX_FILES = 4096  # remembered files; past this the memory starts afresh

Latest = dict[RankKey, dict[str, Any]]


class _Seen(NamedTuple):
    """One file as last read."""

    ident: tuple[int, int]  # st_dev, st_ino: a replaced file is another file
    size: int
    mtime_ns: int
    done: int  # the bytes up to here (complete lines) are merged into base; 0: no base
    base: Latest  # latest values of the bytes before done
    skipped: int  # unparseable complete lines before done
    result: tuple[Latest, int, int]  # what the last reading returned (file_latest's shape)


class LatestFiles:
    """``read_latest`` with a memory of each file (see the module docstring)."""

    def __init__(self) -> None:
        self._files: dict[str, _Seen] = {}

    def read(self, target: str) -> MetricsData:
        """Per rank, one record of its latest values, from the metrics files at ``target``
        (NoMetricsFiles / UsageError as ``summary.read_latest``)."""
        return read_latest(target, self.file_latest)

    def file_latest(self, path: str) -> tuple[Latest, int, int]:
        """``summary.file_latest(path)``, from what changed since the last reading."""
        seen = self._files.get(path)
        if seen is None:
            return self._keep(path, _whole(path))
        try:  # non-blocking: a FIFO swapped in never blocks the reader (its own error below)
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return file_latest(path)  # its error, as a full read says it
        try:
            st = os.fstat(fd)
            if seen.ident == (st.st_dev, st.st_ino) and stat.S_ISREG(st.st_mode):
                if (seen.size, seen.mtime_ns) == (st.st_size, st.st_mtime_ns):
                    return seen.result
                if seen.done and seen.done <= st.st_size <= seen.done + MAX_APPEND:
                    chunk = os.pread(fd, st.st_size - seen.done, seen.done)
                    return self._keep(path, _append(path, seen, chunk, st.st_mtime_ns))
        finally:
            os.close(fd)
        return self._keep(path, _whole(path))

    def _keep(self, path: str, seen: _Seen) -> tuple[Latest, int, int]:
        if len(self._files) >= MAX_FILES and path not in self._files:
            self._files = {}  # a new dict: a thread reading the old one is not disturbed
        self._files[path] = seen
        return seen.result


def _append(path: str, seen: _Seen, chunk: bytes, mtime_ns: int) -> _Seen:
    """What was appended after seen.done (chunk) merged into its base."""
    cut = chunk.rfind(b"\n") + 1  # the end of the last complete line in chunk
    base = {rank: dict(values) for rank, values in seen.base.items()}
    file_rank = rank_of({}, path)
    skipped = seen.skipped + _merge(base, chunk[:cut].split(b"\n")[:-1], file_rank)
    result: Latest = base
    truncated = 0
    tail = chunk[cut:]
    if tail.strip():  # a line being written: this reading's, not the base's
        record = parse_record(tail) if len(tail) <= MAX_LINE_BYTES else None
        if record is None:
            truncated = 1
        else:
            result = {rank: dict(values) for rank, values in base.items()}
            _merge_record(result, record, file_rank)
    end = seen.done + len(chunk)
    return _Seen(
        seen.ident, end, mtime_ns, seen.done + cut, base, skipped, (result, skipped, truncated)
    )


def _whole(path: str) -> _Seen:
    """A full reading (summary.file_latest) up to the size stat'ed first; remembered as a
    base only when the file ended with a complete line there."""
    try:
        st = os.stat(path)
    except OSError:
        file_latest(path)  # raises its error, as a full read says it
        raise
    size = st.st_size
    result = file_latest(path, size=size)
    latest, skipped, truncated = result
    done = size if size and not truncated and _ends_line(path, size) else 0
    ident = (st.st_dev, st.st_ino)
    return _Seen(ident, size, st.st_mtime_ns, done, latest, skipped, result)


def _ends_line(path: str, size: int) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(size - 1)
            return f.read(1) == b"\n"
    except OSError:
        return False


def _merge(latest: Latest, lines: list[bytes], file_rank: RankKey) -> int:
    """Records of complete lines (oldest first) into latest; how many could not be used."""
    skipped = 0
    for line in lines:
        record = parse_record(line) if len(line) <= MAX_LINE_BYTES else None
        if record is None:
            skipped += 1 if line.strip() else 0
        else:
            _merge_record(latest, record, file_rank)
    return skipped


def _merge_record(latest: Latest, record: dict[str, Any], file_rank: RankKey) -> None:
    """One record's values over the older ones of its rank (summary.file_latest's rank rule)."""
    rank = record.get("rank")
    key = rank if type(rank) is int else file_rank
    values = latest.setdefault(key, {})
    for name, value in record.items():
        if name not in HEADER_FIELDS:
            values[name] = revive(value)


__all__ = ["MAX_APPEND", "LatestFiles"]
