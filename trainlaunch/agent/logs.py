"""Per-rank logs: torchrun's directory layout and a real tee from the workers' pipes.

Every stream of every worker goes through a pipe to the agent, which writes the bytes to
``<run_dir>/attempt_<n>/<local_rank>/{stdout,stderr}.log`` as they arrive (so the files
always exist, whatever --tee/--redirects say), whole lines of both to ``combined.log`` in
the order they arrived (trainlaunch/node/interleave.py), and whole lines to the console
according to torchrun's rules. No polling: the agent's selector wakes on data (``logs -f`` latency).
"""

from __future__ import annotations

import collections
import errno
import os
import shutil
import tempfile
from collections.abc import Sequence
from string import Template
from typing import Protocol

from trainlaunch.node.interleave import Combined, read_available, write_all

OUT, ERR = 1, 2  # torchrun's Std bits
TAIL_LINES = 20  # stderr lines kept per rank for the root cause
_MAX_PENDING = 1 << 16  # a "line" longer than this goes out in pieces


def make_run_dir(base: str | None, run_id: str) -> str:
    """``<base>/<run_id>_<rand>`` (base: --log-dir, the replica's dir, or a temp dir)."""
    if base == os.devnull:
        return os.devnull
    base = base or tempfile.mkdtemp(prefix="torchelastic_")
    os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"{run_id}_", dir=base)


def make_attempt_dir(run_dir: str, attempt: int, nproc: int) -> str:
    """A fresh ``attempt_<n>`` with one directory per local rank (wiped if it exists)."""
    if run_dir == os.devnull:
        return os.devnull
    path = os.path.join(run_dir, f"attempt_{attempt}")
    shutil.rmtree(path, ignore_errors=True)
    for lr in range(nproc):
        os.makedirs(os.path.join(path, str(lr)))
    return path


def rank_file(attempt_dir: str, local_rank: int, name: str) -> str:
    """A per-rank file path ('' when logs go to /dev/null)."""
    if attempt_dir == os.devnull:
        return ""
    return os.path.join(attempt_dir, str(local_rank), name)


def console_modes(
    tee: int | dict[int, int],
    redirects: int | dict[int, int],
    ranks_filter: frozenset[int] | None,
    local_rank: int,
) -> dict[int, str]:
    """For each stream: 'prefix' (teed), 'raw' (not redirected) or 'none' (console silent)."""

    def bits(v: int | dict[int, int]) -> int:
        return v if isinstance(v, int) else v.get(local_rank, 0)

    t, r = bits(tee), bits(redirects)
    shown = ranks_filter is None or local_rank in ranks_filter
    modes = {}
    for std in (OUT, ERR):
        mode = "prefix" if t & std else "none" if r & std else "raw"
        modes[std] = mode if shown else "none"
    return modes


def line_prefix(template: str | None, role: str, rank: int, local_rank: int) -> bytes:
    """``[<role><local_rank>]:`` or TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE filled in."""
    if template:
        text = Template(template).safe_substitute(role_name=role, rank=rank, local_rank=local_rank)
    else:
        text = f"[{role}{local_rank}]:"
    return text.encode()


class Live(Protocol):
    """Where a rank's stream is also shown as it arrives (agent/terminal.py)."""

    def write(self, std: int, data: bytes) -> None:
        """Show the bytes now."""


class Stream:
    """One worker stream: pipe -> file (raw bytes) and console (whole, maybe prefixed lines)."""

    def __init__(
        self,
        fd: int,
        path: str,
        console: int,
        mode: str,
        prefix: bytes,
        filtered: int = -1,
        needles: Sequence[str] = (),
        keep_tail: bool = False,
        local_rank: int = -1,
        combined: Combined | None = None,
        std: int = OUT,
        live: Live | None = None,
    ):
        self.fd = fd
        self.local_rank = local_rank
        self.combined, self.std = combined, std
        self.live = live  # a terminal (the rank writes into a pty): every byte there at once
        self.file = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) if path else -1
        self.console = console if mode != "none" else -1
        self.prefix = prefix if mode == "prefix" else b""
        self.filtered = filtered if mode == "prefix" else -1  # torchrun filters teed lines only
        self.needles = [n.encode() for n in needles if n]
        self.pending = bytearray()
        self.tail: collections.deque[bytes] | None = (
            collections.deque(maxlen=TAIL_LINES) if keep_tail else None
        )
        self.open = True
        os.set_blocking(fd, False)

    def read(self) -> bool:
        """Read what is available now; False at end of stream."""
        try:
            return read_available(self.fd, self.feed)
        except OSError as e:
            if e.errno == errno.EIO and self.live is not None:
                return False  # a pty whose every writer closed it: its end of stream
            raise

    def feed(self, data: bytes) -> None:
        """Handle bytes from the worker."""
        if self.file >= 0:
            write_all(self.file, data)
        if self.combined is not None:
            self.combined.feed(self.std, data)
        if self.live is not None:
            self.live.write(self.std, data)
        self.pending += data
        cut = self.pending.rfind(b"\n") + 1
        if not cut and len(self.pending) < _MAX_PENDING:
            return
        if not cut and self.live is not None and self.pending.rfind(b"\r") > 0:
            # a progress bar redrawn in place for long: its line keeps the last drawing
            # (every byte is in the rank's own files), not 64 KiB cut into pieces
            del self.pending[: self.pending.rfind(b"\r")]
            return
        cut = cut or len(self.pending)
        chunk = bytes(self.pending[:cut])
        del self.pending[:cut]
        self._lines(chunk)

    def _lines(self, chunk: bytes) -> None:
        if self.live is not None:  # a line ends at a newline: a bar's \r redraws stay in it
            parts = chunk.split(b"\n")
            lines = [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
        else:
            lines = chunk.splitlines(keepends=True)
        if self.tail is not None:
            self.tail.extend(line[:4096] for line in lines)
        if self.console >= 0:
            out = b"".join(self.prefix + line for line in lines) if self.prefix else chunk
            if not write_all(self.console, out):
                self.console = -1  # the console is gone; the files still get everything
        if self.filtered >= 0 and self.needles:
            hits = [self.prefix + ln for ln in lines if any(n in ln for n in self.needles)]
            if hits:
                write_all(self.filtered, b"".join(hits))

    def close(self) -> None:
        """Flush a last unterminated line (whole, with a newline on the console) and close."""
        if not self.open:
            return
        self.open = False
        if self.pending:
            rest = bytes(self.pending)
            self.pending.clear()
            self._lines(rest if rest.endswith(b"\n") else rest + b"\n")
        if self.combined is not None:
            self.combined.end(self.std)
        for fd in (self.fd, self.file):
            if fd >= 0:
                os.close(fd)

    def tail_text(self) -> str:
        """The last lines kept (stderr), decoded leniently."""
        lines = list(self.tail or ())
        if self.pending:
            lines.append(bytes(self.pending))
        return b"".join(lines).decode("utf-8", "replace")
