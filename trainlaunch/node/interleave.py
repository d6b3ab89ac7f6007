"""A replica's (or rank's) stdout and stderr in the order they arrived: ``combined.log``.

Whoever reads a process's two pipes (the local supervisor, the node agent) writes every byte
of each stream to its own file (``stdout.log``, ``stderr.log``: exact) and whole lines of both
to ``combined.log`` in the order they arrive, so ``logs`` shows a failing rank's warnings
between the prints that surrounded them. Lines are held until complete (``python -u`` writes
a line's text and its newline separately), so the other stream never cuts a line in two.
Torch-free and stdlib-only: the local supervisor, the node agent and the Slurm replica
runner (schedulers/slurm/replica.py) all use it.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable

COMBINED_FILE = "combined.log"
STREAM_FILES = ("stdout.log", "stderr.log")
MAX_PENDING = 1 << 16  # a "line" longer than this goes out in pieces


def write_all(fd: int, data: bytes) -> bool:
    """Write everything (a signal may cut a write short); False once the reader is gone."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BrokenPipeError:
            return False
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EINTR):
                continue
            return False
        view = view[n:]
    return True


def open_log(path: str, mode: int = 0o600, truncate: bool = False) -> int:
    """An append-only log file descriptor (not inherited by children)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
    return os.open(path, flags | (os.O_TRUNC if truncate else 0), mode)


def open_logs(directory: str) -> tuple[int, int, int]:
    """A process's combined.log, stdout.log and stderr.log (0600, appended), in that order.

    combined.log is created first: readers take its existence to mean "this replica has one".
    """
    fds: list[int] = []
    try:
        for name in (COMBINED_FILE, *STREAM_FILES):
            fds.append(open_log(os.path.join(directory, name)))
            os.fchmod(fds[-1], 0o600)
    except OSError:
        for fd in fds:
            os.close(fd)
        raise
    return fds[0], fds[1], fds[2]


class Combined:
    """The combined file of one process: whole lines of its streams, in arrival order."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending: dict[int, bytearray] = {}

    def feed(self, stream: int, data: bytes) -> None:
        """Bytes from one stream: its complete lines go out now, the rest waits."""
        buf = self.pending.setdefault(stream, bytearray())
        buf += data
        cut = buf.rfind(b"\n") + 1
        if not cut and len(buf) < MAX_PENDING:
            return
        cut = cut or len(buf)
        if self.fd >= 0:
            write_all(self.fd, bytes(buf[:cut]))
        del buf[:cut]

    def end(self, stream: int) -> None:
        """The stream ended: its unterminated last line goes out, with a newline."""
        buf = self.pending.pop(stream, None)
        if buf and self.fd >= 0:
            write_all(self.fd, bytes(buf) + b"\n")

    def close(self) -> None:
        """Flush every stream's last line and close the file."""
        for stream in list(self.pending):
            self.end(stream)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def read_available(fd: int, take: Callable[[bytes], bool | None]) -> bool:
    """Hand take() what a non-blocking pipe holds now, 64 KiB at a time; False at the end of
    the stream, or once take() returns False."""
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        except InterruptedError:
            continue
        if not data or take(data) is False:
            return False


class Pump:
    """One stream's pipe: every byte to its own file, whole lines to the combined file."""

    def __init__(self, fd: int, file_fd: int, combined: Combined, stream: int) -> None:
        self.fd, self.file_fd, self.combined, self.stream = fd, file_fd, combined, stream
        self.open = True
        os.set_blocking(fd, False)

    def read(self) -> bool:
        """Copy what the pipe holds now; False at end of stream (then close())."""
        return read_available(self.fd, self._take)

    def _take(self, data: bytes) -> bool:
        if self.file_fd >= 0 and not write_all(self.file_fd, data):
            return False  # the log cannot be written (a full disk): the writer gets EPIPE
        self.combined.feed(self.stream, data)
        return True

    def close(self) -> None:
        """Drain what is left, then close the pipe and the file (not the combined file)."""
        if not self.open:
            return
        self.open = False
        with contextlib.suppress(OSError):
            self.read()
        self.combined.end(self.stream)
        for fd in (self.fd, self.file_fd):
            if fd >= 0:
                os.close(fd)
