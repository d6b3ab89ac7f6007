"""Read the JSON Lines metrics that ``trainlaunch.rank`` writes, for ``trainlaunch metrics``.

Pure functions, no torch, no numpy: find the files, parse them (tolerating a truncated last line
and counting lines that do not parse), then derive per-rank latest values, a step -> value series
of one metric per rank, and a plain-ASCII chart of such series.

A record's rank is its ``"rank"`` field, else the ``rank<N>`` in its file name, else the file
name itself. The writer spells non-finite floats ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
they are read back as floats. When a step appears twice for a rank (a restarted job appends to
the same file), the later record wins.
"""

from __future__ import annotations

import dataclasses
import errno
import glob
import json
import math
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from trainlaunch.errors import UsageError

__all__ = [
    "MetricsData",
    "NoMetricsFiles",
    "RankKey",
    "find_metric_files",
    "json_safe",
    "latest_values",
    "metric_names",
    "metric_series",
    "parse_lines",
    "read_metrics",
    "render_chart",
    "sparkline",
]

RankKey = int | str  # an int rank, or the file name when the rank is unknown
HEADER_FIELDS = ("step", "epoch", "timestamp", "rank")
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)")
MAX_LINE_BYTES = 1 << 20  # a longer line is damage, not a record: counted and skipped
MAX_DEPTH = 64  # deeper nesting is damage too (and would exhaust the parser's stack)
_MARKS = "*o+x#@%&"
_SPARK = " .:-=+*#%@"


class NoMetricsFiles(UsageError):
    """Nothing at a metrics path is a metrics file (for an app's own path: it logged none yet)."""


@dataclasses.dataclass
class MetricsData:
    """Records per rank, in file order, and how many lines could not be used."""

    records: dict[RankKey, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    files: list[str] = dataclasses.field(default_factory=list)
    skipped_lines: int = 0  # complete lines that are not a well-shaped JSON object
    truncated_lines: int = 0  # a last line cut short (no newline) that does not parse
    skipped_files: list[str] = dataclasses.field(default_factory=list)  # not regular files


def _natural_key(path: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def find_metric_files(target: str) -> list[str]:
    """The ``.jsonl`` files of a directory, the matches of a glob, or the file itself.

    Only regular files (or links to one) count: a directory, FIFO or device in place of a
    rank file is left out, so reading can neither hang nor run away.
    """
    return metric_files(target)[0]


def metric_files(target: str) -> tuple[list[str], list[str]]:
    """(find_metric_files, skipped_files) of ``target``, from one listing."""
    paths = candidates(target)
    found = [p for p in paths if os.path.isfile(p)]
    if not found:
        odd = sorted(set(paths) - set(found))
        why = f" ({odd[0]} is not a regular file)" if odd else ""
        raise NoMetricsFiles(
            f"no metrics files found at {target!r}{why}",
            hint="pass the metrics directory (TRAINLAUNCH_METRICS_PATH), a .jsonl file or a glob",
        )
    skipped = sorted(set(paths) - set(found), key=_natural_key) if len(paths) > len(found) else []
    return sorted(found, key=_natural_key), skipped  # rank2 before rank10


def skipped_files(target: str, files: Sequence[str]) -> list[str]:
    """What ``target`` names that is not a regular file (reported, never read)."""
    return sorted(set(candidates(target)) - set(files), key=_natural_key)


def candidates(target: str) -> list[str]:
    if any(char in target for char in "*?["):
        return glob.glob(os.path.expanduser(target))
    if os.path.isdir(target):
        return glob.glob(os.path.join(target, "*.jsonl"))
    return [target] if os.path.lexists(target) else []


def too_deep(line: str) -> bool:
    """True if the line nests arrays/objects deeper than MAX_DEPTH (a JSON bomb)."""
    if line.count("[") + line.count("{") <= MAX_DEPTH:
        return False
    depth, in_str, escaped = 0, False, False
    for char in line:
        if in_str:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_str = False
        elif char == '"':
            in_str = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif char in "]}":
            depth -= 1
    return False


def well_shaped(record: Mapping[str, Any]) -> bool:
    """The header fields have the types the writer gives them (else the record is damaged)."""
    for key in ("step", "epoch"):
        value = record.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            return False
    rank = record.get("rank")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
        return False
    stamp = record.get("timestamp")
    return stamp is None or (isinstance(stamp, (str, int, float)) and not isinstance(stamp, bool))


def next_data(fd: int, pos: int) -> int | None:
    """The first offset at or after pos that holds data, None if only a hole (NULs nobody
    wrote: a sparse file) follows. A filesystem that cannot tell says pos: all is data.

    The file offset is put back: a buffered reader over fd trusts it."""
    here = os.lseek(fd, 0, os.SEEK_CUR)
    try:
        return os.lseek(fd, pos, os.SEEK_DATA)
    except OSError as e:
        return None if e.errno == errno.ENXIO else pos
    finally:
        os.lseek(fd, here, os.SEEK_SET)


def last_data_before(fd: int, pos: int) -> int | None:
    """The offset of the last data byte before pos, None if [0, pos) is all hole.

    SEEK_DATA only looks forward; "is there data in [p, pos)" only turns false as p grows,
    so a binary search finds it in ~35 lseeks for any file size (a 20 GiB hole took ~100 s
    to read through)."""
    first = next_data(fd, 0)
    if first is None or first >= pos:
        return None
    low, high = first, pos - 1  # data in [low, pos); the answer is the largest such p
    while low < high:
        mid = (low + high + 1) // 2
        found = next_data(fd, mid)
        if found is not None and found < pos:
            low = max(mid, found)
        else:
            high = mid - 1
    return low


def read_lines(path: str) -> Iterator[str]:
    """The lines of a regular file, each cut at MAX_LINE_BYTES (the rest of it is dropped).

    A cut line lacks its newline and no longer parses, so it is counted, not used; opening
    non-blocking and checking the file type means a FIFO swapped in never blocks the reader.
    The rest of a cut line is dropped without reading the holes of a sparse file (they hold
    no newline), so a file costs what was written to it, not its size.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise UsageError(f"cannot read metrics file {path}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"cannot read metrics file {path}: not a regular file")
        while True:
            line = stream.readline(MAX_LINE_BYTES)
            if not line:
                return
            if len(line) == MAX_LINE_BYTES and not line.endswith(b"\n"):
                while True:  # drop the rest of an over-long line without holding it
                    ahead = next_data(fd, stream.tell())
                    if ahead is None:  # a hole up to the end: the line is never ended
                        stream.seek(0, os.SEEK_END)
                        rest = b""
                        break
                    stream.seek(ahead)
                    rest = stream.readline(MAX_LINE_BYTES)
                    if not rest or rest.endswith(b"\n"):
                        break
                yield "\0\n" if rest else "\0"  # unusable: counted as skipped, never parsed
                continue
            yield line.decode("utf-8", errors="replace")


def revive(value: Any) -> Any:
    """A value read back: the writer's "NaN"/"Infinity"/"-Infinity" strings become floats."""
    if isinstance(value, str):
        return _NONFINITE.get(value, value)
    if isinstance(value, list):
        return [revive(item) for item in value]
    return value


def json_safe(value: Any) -> Any:
    """The inverse of :func:`revive` for JSON out: non-finite floats spelled as the writer
    spells them ("NaN", "Infinity", "-Infinity"), through dicts, lists and tuples."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def parse_lines(lines: Iterable[str]) -> tuple[list[dict[str, Any]], int, int]:
    """JSON objects from ``lines``: (records, skipped lines, truncated last lines)."""
    records: list[dict[str, Any]] = []
    skipped = truncated = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = None if too_deep(line) else json.loads(line)
        except (ValueError, RecursionError):
            record = None
        if not isinstance(record, dict) or not well_shaped(record):
            # Only the last line can lack its newline: that is a write cut short by a crash.
            if line.endswith("\n"):
                skipped += 1
            else:
                truncated += 1
            continue
        records.append({key: revive(value) for key, value in record.items()})
    return records, skipped, truncated


def rank_of(record: Mapping[str, Any], path: str) -> RankKey:
    """A record's rank: its ``rank`` field, else ``rank<N>`` in the file name, else the name."""
    rank = record.get("rank")
    if isinstance(rank, int) and not isinstance(rank, bool):
        return rank
    match = _RANK_IN_NAME.search(os.path.basename(path))
    return int(match.group(1)) if match else os.path.basename(path)


def read_metrics(target: str) -> MetricsData:
    """Read every metrics file at ``target`` (see :func:`find_metric_files`)."""
    data = MetricsData(files=find_metric_files(target))
    data.skipped_files = skipped_files(target, data.files)
    for path in data.files:
        records, skipped, truncated = parse_lines(read_lines(path))
        data.skipped_lines += skipped
        data.truncated_lines += truncated
        for record in records:
            data.records.setdefault(rank_of(record, path), []).append(record)
    return data


def _sorted_keys(keys: Iterable[RankKey]) -> list[RankKey]:
    return sorted(keys, key=lambda k: (isinstance(k, str), k if isinstance(k, int) else 0, str(k)))


def metric_names(data: MetricsData) -> list[str]:
    """Every metric name seen, sorted (header fields excluded)."""
    names = {key for rows in data.records.values() for row in rows for key in row}
    return sorted(names - set(HEADER_FIELDS))


def latest_values(data: MetricsData) -> dict[RankKey, dict[str, Any]]:
    """Per rank, the last value of every metric, plus ``step`` of that rank's last record."""
    out: dict[RankKey, dict[str, Any]] = {}
    for rank in _sorted_keys(data.records):
        latest: dict[str, Any] = {}
        for row in data.records[rank]:
            latest.update({k: v for k, v in row.items() if k not in ("timestamp", "rank")})
        out[rank] = latest
    return out


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def metric_series(data: MetricsData, metric: str) -> dict[RankKey, list[tuple[int, float]]]:
    """Per rank, ``(step, value)`` of ``metric`` sorted by step; non-numeric values are left out."""
    out: dict[RankKey, list[tuple[int, float]]] = {}
    for rank in _sorted_keys(data.records):
        by_step: dict[int, float] = {}
        for row in data.records[rank]:
            value, step = _as_number(row.get(metric)), row.get("step")
            if value is not None and isinstance(step, int) and not isinstance(step, bool):
                by_step[step] = value  # a restarted run re-logs steps: the later one wins
        if by_step:
            out[rank] = sorted(by_step.items())
    return out


def sparkline(values: Sequence[float], width: int | None = None) -> str:
    """A one-line ASCII sparkline; ``width`` buckets are averaged; non-finite values are ``!``."""
    if not values:
        return ""
    width = len(values) if width is None else max(1, width)
    buckets: list[list[float]] = [[] for _ in range(min(width, len(values)))]
    for index, value in enumerate(values):
        buckets[index * len(buckets) // len(values)].append(value)
    means = [
        math.fsum(b) / len(b) if all(math.isfinite(v) for v in b) else math.nan for b in buckets
    ]
    finite = [m for m in means if math.isfinite(m)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    span = high - low or 1.0
    top = len(_SPARK) - 1
    return "".join(
        _SPARK[round((m - low) / span * top)] if math.isfinite(m) else "!" for m in means
    )


def _label(value: float) -> str:
    return f"{value:.4g}"


def render_chart(
    series: Mapping[RankKey, Sequence[tuple[int, float]]],
    width: int = 60,
    height: int = 12,
    title: str = "",
) -> str:
    """A plain-ASCII line chart of step -> value, one marker per rank, with a legend."""
    width, height = max(width, 8), max(height, 3)
    points = [(x, y) for pts in series.values() for x, y in pts if math.isfinite(y)]
    if not points:
        return f"{title}\n(no finite data)" if title else "(no finite data)"
    x_low, x_high = min(p[0] for p in points), max(p[0] for p in points)
    y_low, y_high = min(p[1] for p in points), max(p[1] for p in points)
    if y_low == y_high:  # a flat line still needs a span to be drawn in the middle
        y_low, y_high = y_low - 1.0, y_high + 1.0
    grid = [[" "] * width for _ in range(height)]
    legend = []
    for index, rank in enumerate(_sorted_keys(series)):
        mark = _MARKS[index % len(_MARKS)]
        legend.append(f"{mark} rank {rank}")
        for x, y in series[rank]:
            if not math.isfinite(y):
                continue
            col = 0 if x_high == x_low else round((x - x_low) / (x_high - x_low) * (width - 1))
            line = round((y_high - y) / (y_high - y_low) * (height - 1))
            grid[line][col] = mark
    pad = max(len(_label(y_high)), len(_label(y_low)))
    lines = [title] if title else []
    for row_index, row in enumerate(grid):
        label = (
            _label(y_high) if row_index == 0 else _label(y_low) if row_index == height - 1 else ""
        )
        lines.append(f"{label:>{pad}} |{''.join(row)}".rstrip())
    lines.append(" " * pad + " +" + "-" * width)
    left, right = f"step {x_low}", str(x_high)
    lines.append(" " * (pad + 2) + left + right.rjust(max(width - len(left), len(right) + 1)))
    lines.append("  ".join(legend))
    return "\n".join(lines)
