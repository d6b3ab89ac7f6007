"""The latest value of every metric per rank, read from the END of each metrics file.

``trainlaunch metrics`` without ``--metric`` shows one row per rank: the last value of each
metric. Reading a month-long run's file front to back to find them costs seconds per million
records, and keeping its records costs memory. This reads each file backwards in blocks and
stops as soon as every metric the file holds has been seen: MetricLogger lists a file's metric
names in a sidecar (``settings.METRIC_NAMES_SUFFIX``) before it writes a record that uses
them. Without a sidecar (a file from another writer, or one whose names were too many to list)
the whole file is read, still backwards and in bounded memory.

The result is a :class:`~trainlaunch.metrics.reader.MetricsData` holding one record per rank
(its latest values), so the summary renders exactly like a full read; the unparseable and
truncated line counts cover the lines that were read.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from typing import Any

from trainlaunch import settings
from trainlaunch.errors import UsageError
from trainlaunch.metrics.reader import (
    MAX_DEPTH,
    MAX_LINE_BYTES,
    MetricsData,
    RankKey,
    last_data_before,
    metric_files,
    next_data,
    rank_of,
    revive,
    too_deep,
    well_shaped,
)

BLOCK = 1 << 20
MAX_LINE = MAX_LINE_BYTES  # a longer "record" is damage (as in a full read), never held
_loads: Callable[[bytes], Any]
try:  # orjson is a dependency; json keeps this module working without it
    from orjson import loads as _loads
except ImportError:  # pragma: no cover
    _loads = json.loads

HEADER_FIELDS = ("timestamp", "rank")  # header fields that are not shown as values


def read_latest(
    target: str,
    one_file: Callable[[str], tuple[dict[RankKey, dict[str, Any]], int, int]] | None = None,
) -> MetricsData:
    """Per rank, one record of its latest values, from the metrics files at ``target``
    (one_file: how one file's latest values are read; :func:`file_latest` by default)."""
    files, odd = metric_files(target)
    data = MetricsData(files=files, skipped_files=odd)
    for path in data.files:  # in file order: a later file's values win, as in a full read
        latest, skipped, truncated = (one_file or file_latest)(path)
        data.skipped_lines += skipped
        data.truncated_lines += truncated
        for rank, values in latest.items():
            rows = data.records.setdefault(rank, [{}])
            rows[0] = {**rows[0], **values}
    return data


def metric_names_of(path: str) -> dict[RankKey, set[str]] | None:
    """Per rank, the names the sidecar of ``path`` lists; None when there is none or it gave up.

    The sidecar is a JSON value per line: ``{"rank": R}`` says whose names follow (R null: the
    rank in the file name), a string is a name, ``null`` means too many names to list.
    """
    try:
        with open(path + settings.METRIC_NAMES_SUFFIX, "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    by_rank: dict[RankKey, set[str]] = {}
    rank = rank_of({}, path)
    for line in lines:
        try:
            value = _loads(line)
        except ValueError:
            return None
        if isinstance(value, dict) and "rank" in value:
            rank = rank_of(value, path)
            by_rank.setdefault(rank, set())
        elif isinstance(value, str):
            by_rank.setdefault(rank, set()).add(value)
        else:
            return None  # null (too many names to list) or not ours
    return by_rank


def file_latest(
    path: str, block: int = BLOCK, max_line: int = MAX_LINE, size: int | None = None
) -> tuple[dict[RankKey, dict[str, Any]], int, int]:
    """(latest values per rank, unparseable lines, truncated lines) of one file, read backwards.

    ``block`` is the read size; a line longer than ``max_line`` counts as unparseable; ``size``:
    read the file as if it ended there (its size when it was stat'ed: metrics/latest.py).
    """
    names = metric_names_of(path)
    wanted = None if names is None else {r: n | {"step", "epoch"} for r, n in names.items()}
    file_rank = rank_of({}, path)
    latest: dict[RankKey, dict[str, Any]] = {}
    skipped = truncated = 0
    for line in lines_backwards(path, block, max_line, size):
        record = parse_record(line)
        if record is None:
            if line.strip():
                if line.endswith(b"\n"):
                    skipped += 1
                else:
                    truncated += 1  # only the last line can lack its newline: a cut write
            continue
        rank = record.get("rank")
        key = rank if type(rank) is int else file_rank  # as metrics_reader.rank_of, inlined
        values = latest.get(key)
        if values is None:
            values = latest[key] = {}
        for name in record.keys() - values.keys():  # usually empty: one set operation in C
            if name not in HEADER_FIELDS:
                values[name] = revive(record[name])
        # every rank the sidecar names has shown every name: nothing older changes the result
        if wanted is not None and all(
            want <= latest.get(rank, {}).keys() for rank, want in wanted.items()
        ):
            break
    return latest, skipped, truncated


def parse_record(line: bytes) -> dict[str, Any] | None:
    """One line as a well-shaped record, or None: the rules of metrics_reader.parse_lines."""
    if line.count(b"[") + line.count(b"{") > MAX_DEPTH and too_deep(
        line.decode("utf-8", "replace")
    ):
        return None  # a bomb: its values would exhaust the stack later, when revived
    try:
        record = _loads(line)
    except ValueError:
        try:  # bare NaN/Infinity tokens and bad UTF-8 (replaced), as a full read takes them
            record = json.loads(line.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return None
    if type(record) is not dict or not well_shaped(record):
        return None
    return record


def lines_backwards(
    path: str, block: int = BLOCK, max_line: int = MAX_LINE, size: int | None = None
) -> Iterator[bytes]:
    """The lines of a regular file, last first, each with its newline (the file's last line
    keeps its missing one); a line longer than ``max_line`` comes back as one unparseable line.
    ``size``: the file's first size bytes only (what was written after is not read)."""
    try:  # non-blocking and type-checked: a FIFO swapped in never blocks the reader
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise UsageError(f"cannot read metrics file {path}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"cannot read metrics file {path}: not a regular file")
        size = f.seek(0, os.SEEK_END) if size is None else min(size, f.seek(0, os.SEEK_END))
        if size == 0:
            return
        f.seek(size - 1)
        terminated = f.read(1) == b"\n"
        end = size - 1 if terminated else size  # the final newline ends the last line
        if end == 0:
            yield b"\n"  # the file is one empty line
        carry = b""  # the start of the line that the block after this one ended
        too_long = False  # the line being read back is longer than MAX_LINE: drop it
        newline = b"\n" if terminated else b""
        while end > 0:
            start = max(0, end - block)
            f.seek(start)
            parts = (f.read(end - start) + carry).split(b"\n")
            end = start
            carry = parts.pop(0) if start > 0 else b""
            if too_long:  # this block continues the dropped line back to its start
                if not parts:
                    carry = b""  # no newline in this block: all of it belongs to that line
                    end = _skip_hole(fd, end)
                    continue
                parts.pop()
                too_long = False
            for part in reversed(parts):
                yield part + newline
                newline = b"\n"
            if len(carry) > max_line:  # unterminated only if it is the file's last line
                yield b"\x00(line too long)" + newline
                carry, too_long, newline = b"", True, b"\n"


def _skip_hole(fd: int, end: int) -> int:
    """Where to go on reading back a dropped line from end: past the hole (a sparse file's
    unwritten NULs, no newline among them) that ends there, if any; 0 if all before is hole."""
    if end == 0 or next_data(fd, end - 1) == end - 1:
        return end
    last = last_data_before(fd, end)
    return 0 if last is None else last + 1
