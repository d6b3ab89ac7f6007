"""The newest lines of an app's logs, with who wrote each, merged across ranks as ``logs
--merge`` shows them (logmerge/): what `top` and `ui` show under an app.

Files on this machine (local, Slurm) are read from their ends, so a long run's tail costs the
same as a short one's; a backend without files (Kubernetes) is read through ``log_lines``.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainlaunch.cli import ranklogs
from trainlaunch.logmerge.view import Item, ViewOptions, view
from trainlaunch.schedulers.api import DescribeAppResponse

TAIL_BYTES = 256 << 10  # of each replica's log: enough for the newest lines of every rank
WINDOW_LINES = 4000  # lines of each replica read back at most (the rank filter applies after)


def tail(
    runner: Any,
    handle: str,
    resp: DescribeAppResponse,
    lines: int = 200,
    merge: str | None = "exact",
    ranks: frozenset[int] | None = None,
) -> list[dict[str, Any]]:
    """The newest ``lines`` as ``logs --json`` objects (merged: each with its rank list)."""
    from trainlaunch.cli.logs import console_formats, round_robin, targets

    h, pairs, app = targets(runner, handle, resp)
    sources = [(h, role, k) for role, k in pairs]
    formats = console_formats(app, sources)
    # a replica's log holds all its ranks' lines: with a rank filter (or merging) the newest
    # `lines` shown may lie further back than its newest `lines`, so read the whole tail window
    per_source = {s: _newest(runner, s, max(lines, WINDOW_LINES)) for s in sources}
    items = ((s, formats[s], line) for s, line in round_robin(per_source))
    seen = [0]

    def counted() -> Iterator[Item]:
        for item in items:
            seen[0] += 1
            yield item

    shown: collections.deque[dict[str, Any]] = collections.deque(maxlen=lines)
    options = ViewOptions(merge=merge, ranks=ranks)
    for _source, m in view(counted(), list(formats.values()), options, lambda: float(seen[0])):
        shown.append(ranklogs.doc(m, merge is not None, {"label": m.label()}))
    return list(shown)


def _newest(runner: Any, source: tuple[Any, str, int], n: int) -> list[str]:
    h, role, k = source
    files = runner.log_files(h, role, k)
    if files:
        return _file_tail([Path(f) for f in files][0], n)
    return list(collections.deque(runner.log_lines(h, role, k), maxlen=n))


def _file_tail(path: Path, n: int) -> list[str]:
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - TAIL_BYTES))
            data = f.read(TAIL_BYTES)
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace")
    got = text.splitlines()
    if size > TAIL_BYTES and got:
        got = got[1:]  # the first line was cut by the seek
    return got[-n:]


__all__ = ["tail"]
