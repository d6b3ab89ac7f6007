"""Reading and following log files line by line (shared by the file-based backends)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

FOLLOW_POLL_S = 0.05  # how often a follower looks for new bytes (latency target: 0.2 s)
FINISHED_CHECK_S = 0.25  # how often it asks whether the app has ended


def _matcher(regex: str | None) -> Callable[[str], bool]:
    if not regex:
        return lambda _line: True
    pattern = re.compile(regex)
    return lambda line: pattern.search(line) is not None


def read_lines(files: Sequence[Path], regex: str | None = None) -> Iterator[str]:
    """Every line of each existing file in turn (no trailing newline)."""
    keep = _matcher(regex)
    for path in files:
        try:
            f = open(path, encoding="utf-8", errors="replace", newline="\n")
        except FileNotFoundError:
            continue
        with f:
            for line in f:
                line = line[:-1] if line.endswith("\n") else line
                if keep(line):
                    yield line


def follow_lines(files: Sequence[Path], regex: str | None, finished: Callable[[], bool]
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
