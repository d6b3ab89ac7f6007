"""Reading and following log files line by line (shared by the file-based backends)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from trainlaunch.errors import StoreError

STREAM_FILES = {"stdout": "stdout.log", "stderr": "stderr.log"}  # one replica's output files
COMBINED_FILE = "combined.log"  # both streams in arrival order (trainlaunch/node/interleave.py)
FOLLOW_POLL_S = 0.05  # how often a follower looks for new bytes (latency target: 0.2 s)
FINISHED_CHECK_S = 0.25  # how often it asks whether the app has ended


def stream_files(directory: Path, streams: str | None, combined: bool = True) -> list[Path]:
    """A replica's output files for a stream name.

    combined (the default): ``combined.log``, both streams in the order they arrived. A
    replica written before it existed (its stdout.log exists, combined.log does not) falls
    back to stdout then stderr. combined.log is created before stdout.log, so a replica
    that has not started yet is read (and followed) from combined.log. A backend that
    writes no combined file passes ``combined=False``.
    """
    which = streams or "combined"
    if which != "combined":
        return [directory / STREAM_FILES[which]]
    path = directory / COMBINED_FILE
    if combined and (path.exists() or not (directory / STREAM_FILES["stdout"]).exists()):
        return [path]
    return [directory / n for n in STREAM_FILES.values()]


def replica_files(
    root: Path, parts: Sequence[str], streams: str | None, combined: bool = True
) -> list[Path]:
    """stream_files of root/parts..., checked: root exists and nothing below it is a symlink.

    root is the app's (or job's) directory. A missing root means its records were deleted;
    a symlink below it could lead anywhere: both are StoreErrors, never an empty log.
    """
    if not root.is_dir():
        raise StoreError(
            f"the app's directory {root} is gone (deleted?): its logs cannot be read",
            hint="`trainlaunch status` still shows what the scheduler knows",
        )
    path = root
    for part in parts:
        path = path / part
        _no_symlink(path)
    files = stream_files(path, streams, combined)
    for f in files:
        _no_symlink(f)
    return files


def _no_symlink(path: Path) -> None:
    if path.is_symlink():
        raise StoreError(
            f"refusing to read logs through the symlink {path}: it may lead out of the store",
            hint="remove the link; logs are only read from the app's own files",
        )


def _matcher(regex: str | None) -> Callable[[str], bool]:
    if not regex:
        return lambda _line: True
    pattern = re.compile(regex)
    return lambda line: pattern.search(line) is not None


Span = tuple[int, "int | None"]  # [start, end) byte offsets; end None = to the end


def time_span(timeline: Path, stream: str, since: float | None, until: float | None) -> Span:
    """Byte offsets of stream's log covering [since, until], from a replica's timeline.jsonl.

    Each timeline sample says how large the log was at a time, so lines written between
    two samples are attributed to that interval: the span may include up to one sampling
    interval more than asked, never less.
    """
    if since is None and until is None:
        return (0, None)
    samples = []
    try:
        with open(timeline, encoding="utf-8") as f:
            for line in f:
                try:
                    d = json.loads(line)
                    samples.append((float(d["t"]), int(d[stream])))
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line after a crash
    except FileNotFoundError:
        return (0, None)
    start, end = 0, None
    if since is not None:
        before = [size for t, size in samples if t <= since]
        start = before[-1] if before else 0
    if until is not None:
        after = [size for t, size in samples if t >= until]
        end = after[0] if after else None
    return (start, end)


def read_lines(
    files: Sequence[Path], regex: str | None = None, spans: Sequence[Span] | None = None
) -> Iterator[str]:
    """Every line of each existing file in turn (no trailing newline), within its span."""
    keep = _matcher(regex)
    for n, path in enumerate(files):
        start, end = spans[n] if spans else (0, None)
        try:
            f = open(path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            continue
        with f:
            f.seek(start)
            data = f.read() if end is None else f.read(max(0, end - start))
        if not data:
            continue
        text = data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        for line in lines:
            if keep(line):
                yield line


def follow_lines(
    files: Sequence[Path],
    regex: str | None,
    finished: Callable[[], bool],
    starts: Sequence[int] | None = None,
) -> Iterator[str]:
    """Yield complete lines as they are appended; end once finished() and fully drained."""
    keep = _matcher(regex)
    handles: dict[Path, object] = {}
    partial: dict[Path, bytes] = {p: b"" for p in files}
    last_check = 0.0
    done = False
    try:
        while True:
            got = False
            for path in files:
                f = handles.get(path)
                if f is None:
                    try:
                        f = handles[path] = open(path, "rb")  # noqa: SIM115
                    except FileNotFoundError:
                        continue
                    if starts:
                        f.seek(starts[files.index(path)])
                data = f.read()  # type: ignore[attr-defined]
                if not data:
                    continue
                got = True
                lines = (partial[path] + data).split(b"\n")
                partial[path] = lines.pop()
                for raw in lines:
                    line = raw.decode("utf-8", errors="replace")
                    if keep(line):
                        yield line
            if got:
                continue
            if done:
                for path in files:
                    rest = partial[path]
                    if rest:
                        line = rest.decode("utf-8", errors="replace")
                        if keep(line):
                            yield line
                return
            now = time.monotonic()
            if now - last_check >= FINISHED_CHECK_S:
                last_check = now
                if finished():
                    done = True  # one more pass drains what was written before the end
                    continue
            time.sleep(FOLLOW_POLL_S)
    finally:
        for f in handles.values():
            f.close()  # type: ignore[attr-defined]
