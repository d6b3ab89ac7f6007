"""A line redrawn in place, read back as a terminal left it: carriage returns collapsed.

A progress bar (tqdm's, Lightning's) writes ``\\r`` and its new state many times on one line,
then a newline; in a log that is one line holding every state. A terminal shows only what the
last drawing left: each ``\\r`` returns to the line's start and what follows overwrites the
characters under it (a shorter drawing leaves the end of a longer one visible). `logs` prints
that (``--raw``: the bytes as written). A rank's prefix (``[default0]:``) before the first
drawing is the agent's, not the rank's: it stays in front.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_REDRAWN = re.compile(rb"[^\n]*\r[^\n]*")


def collapse(text: str) -> str:
    """What a terminal shows of one line with carriage returns in it."""
    if "\r" not in text:
        return text
    shown = ""
    for drawing in text.split("\r"):
        shown = drawing + shown[len(drawing) :]
    return shown


def collapse_lines(chunk: bytes, prefixes: Iterable[bytes] = ()) -> bytes:
    """Whole lines with every redrawn one collapsed (C-speed scan; Python per such line only);
    a line that starts with one of prefixes keeps it and collapses what follows."""
    if b"\r" not in chunk:
        return chunk
    keys = tuple(prefixes)

    def one(m: re.Match[bytes]) -> bytes:
        line = m.group()
        head = next((k for k in keys if line.startswith(k)), b"")
        text = line[len(head) :].decode("utf-8", "surrogateescape")
        return head + collapse(text).encode("utf-8", "surrogateescape")

    return _REDRAWN.sub(one, chunk)


__all__ = ["collapse", "collapse_lines"]
