"""How `logs` shows who wrote a line: one prefix naming role, replica and rank, in colour on
a terminal; merged lines with their rank set; the JSON objects of ``--json``; the fast copy of a
whole agent log with its prefixes rewritten (no per-line Python)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from trainlaunch.logmerge.merge import Merged
from trainlaunch.logmerge.ranks import TeeFormat, Writer, relabel
from trainlaunch.logmerge.redraw import collapse_lines

_COLORS = ["36", "33", "35", "32", "34", "31", "96", "93", "95", "92", "94", "91"]
CHUNK = 256 << 10


class Labels:
    """Each writer's prefix, padded to one width (and coloured) across the followed logs."""

    def __init__(
        self,
        formats: Mapping[Any, TeeFormat],
        color: bool,
        raw: bool = False,
        extra: Mapping[Any, str] | None = None,
    ) -> None:
        self.color, self.raw = color, raw
        self.extra = dict(extra or {})  # a label before the writer's (a sweep point's)
        self._colors: dict[tuple[str, int, int | None], str] = {}
        plain: list[str] = []
        for source, fmt in formats.items():
            for w in [Writer(fmt.role, fmt.replica), *fmt.writers()]:
                plain.append(self._join(source, w.label()))
                self._colors.setdefault(_key(w), _COLORS[len(self._colors) % len(_COLORS)])
        self.width = max((len(p) for p in plain), default=0)

    def _join(self, source: Any, label: str) -> str:
        point = self.extra.get(source)
        return f"[{point}] {label}" if point else label

    def prefix(self, source: Any, m: Merged) -> str:
        """The prefix of one shown line, with its separating space ('' with --raw)."""
        if self.raw:
            return ""
        label = self._join(source, m.label()).ljust(self.width)
        if not self.color:
            return label + " "
        code = self._colors.get(_key(m.writers[0]), "0") if len(m.writers) == 1 else "1"
        return f"\x1b[{code}m{label}\x1b[0m "

    def line(self, source: Any, m: Merged) -> str:
        """What is printed for it: prefix and text; an empty line stays empty."""
        return self.prefix(source, m) + m.text if m.text else ""

    def copy_table(self, source: Any, fmt: TeeFormat) -> tuple[bytes, dict[bytes, bytes]]:
        """The replica's own prefix and, per worker prefix the agent writes, its new prefix."""
        own = self.prefix(source, Merged("", (Writer(fmt.role, fmt.replica),))).encode()
        table = {}
        for w in fmt.writers():
            tee = fmt.literal_prefix(w.local_rank or 0)
            if tee is not None:
                table[tee] = self.prefix(source, Merged("", (w,))).encode()
        return own, table


def _key(w: Writer) -> tuple[str, int, int | None]:
    return (w.role, w.replica, w.local_rank)


def doc(m: Merged, merged: bool, extra: Mapping[str, Any]) -> dict[str, Any]:
    """One ``--json`` object: a line with its writer, or (merging) with all of them."""
    if merged:
        return {**extra, **m.to_dict()}
    w = m.writers[0]
    return {
        **extra,
        "role": w.role,
        "replica": w.replica,
        "rank": w.rank,
        "local_rank": w.local_rank,
        "line": m.text,
    }


def relabelled_copy(
    path: Any, own: bytes, table: Mapping[bytes, bytes], out: Any, redraw: bool = False
) -> None:
    """Copy a log file to out, each line with its writer's prefix (logmerge.ranks.relabel);
    redraw: lines a progress bar redrew in place as a terminal left them (logmerge.redraw)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return
    rest = b""
    keys = tuple(table)

    def lines(whole: bytes) -> bytes:
        return relabel(collapse_lines(whole, keys) if redraw else whole, own, table)

    try:
        out.flush()
        while chunk := os.read(fd, CHUNK):
            chunk = rest + chunk
            cut = chunk.rfind(b"\n") + 1
            rest = chunk[cut:]
            if cut:
                out.write(lines(chunk[:cut]))
        if rest:  # a last line without a newline gets one
            out.write(lines(rest + b"\n"))
    finally:
        os.close(fd)


def redrawn(path: Any) -> bool:
    """Whether a log file holds a carriage return (a line redrawn in place), at memchr speed."""
    import mmap

    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(b"\r") >= 0
    except (OSError, ValueError):  # missing, or empty (nothing to map)
        return False


def can_copy(formats: Iterable[TeeFormat]) -> bool:
    """Whether every log can be copied with its prefixes rewritten in bulk (torchrun's own
    prefix, or none: a template of the user's needs the line-by-line path)."""
    return all(f.pattern is None or (f.default_prefix is not None and f.nproc) for f in formats)


__all__ = ["Labels", "can_copy", "doc", "redrawn", "relabelled_copy"]
