"""A replica's (or rank's) stdout and stderr in the order they arrived: ``combined.log``.

Whoever reads a process's two pipes (the local supervisor, the node agent) writes every byte
of each stream to its own file (``stdout.log``, ``stderr.log``: exact) and whole lines of both
to ``combined.log`` in the order they arrive, so ``logs`` shows a failing rank's warnings
between the prints that surrounded them. Lines are held until complete (``python -u`` writes
a line's text and its newline separately), so the other stream never cuts a line in two.
Torch-free and stdlib-only: the local supervisor, the node agent and the Slurm replica
runner (schedulers/slurm/replica.py) all use it.

A log that cannot be written (a full disk: ENOSPC) never stops the process writing it: its
pipe is still drained, what cannot be written is dropped and counted (:class:`LogFile`), and
once writing works again a line in the file says how much is missing there
(``[trainlaunch: 524288 bytes lost here: No space left on device]``). The pipe used to be
closed instead: the process got EPIPE and died of a 5-second full disk, and ``combined.log``
ended silently earlier than ``stdout.log`` (issue 23 #14).
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


def _write_some(fd: int, data: bytes) -> tuple[int, int]:
    """Write as much of data as the file takes: (bytes written, errno of the failure or 0)."""
    view, done = memoryview(data), 0
    while done < len(data):
        try:
            done += os.write(fd, view[done:])
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EINTR):
                continue
            return done, e.errno or errno.EIO
    return done, 0


class LogFile:
    """An appended log that never blocks or fails its writer: what cannot be written is
    dropped and counted (``lost``); when a write works again, a line first says how much is
    missing at that place."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lost = 0  # bytes dropped in all
        self.gap = 0  # bytes dropped since the last line that says so
        self.why = ""
        self._line_start = True  # the file's last byte ends a line (a marker needs its own)

    def write(self, data: bytes) -> None:
        """Append data, or as much as fits (the rest is counted)."""
        if self.fd < 0 or not data:
            return
        if self.gap and not self.mark():
            self._drop(len(data), 0)
            return
        done, err = _write_some(self.fd, data)
        if done:
            self._line_start = data[done - 1 : done] == b"\n"
        if done < len(data):
            self._drop(len(data) - done, err)

    def mark(self) -> bool:
        """Say where and how much was lost (True once said, or when nothing was)."""
        if not self.gap:
            return True
        text = f"[trainlaunch: {self.gap} bytes lost here: {self.why}]\n".encode()
        text = text if self._line_start else b"\n" + text
        done, _ = _write_some(self.fd, text)
        if done:
            self._line_start = text[done - 1 : done] == b"\n"
        if done < len(text):
            return False  # still full: the line is written whole later (a torn one is rare)
        self.gap = 0
        return True

    def _drop(self, n: int, err: int) -> None:
        self.lost += n
        self.gap += n
        if err:
            self.why = os.strerror(err)


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
        self.log = LogFile(fd)  # a full disk drops (and counts) lines, never blocks them
        self.pending: dict[int, bytearray] = {}

    @property
    def lost(self) -> int:
        """Bytes that could not be written to the file."""
        return self.log.lost

    def feed(self, stream: int, data: bytes) -> None:
        """Bytes from one stream: its complete lines go out now, the rest waits."""
        buf = self.pending.setdefault(stream, bytearray())
        buf += data
        cut = buf.rfind(b"\n") + 1
        if not cut and len(buf) < MAX_PENDING:
            return
        cut = cut or len(buf)
        self.log.write(bytes(buf[:cut]))
        del buf[:cut]

    def end(self, stream: int) -> None:
        """The stream ended: its unterminated last line goes out, with a newline."""
        buf = self.pending.pop(stream, None)
        if buf:
            self.log.write(bytes(buf) + b"\n")

    def close(self) -> None:
        """Flush every stream's last line and close the file (saying what was lost)."""
        for stream in list(self.pending):
            self.end(stream)
        if self.fd >= 0:
            self.log.mark()
            os.close(self.fd)
            self.fd = self.log.fd = -1


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
        self.file = LogFile(file_fd)
        self.open = True
        os.set_blocking(fd, False)

    @property
    def lost(self) -> int:
        """Bytes of this stream that could not be written to its file."""
        return self.file.lost

    def read(self) -> bool:
        """Copy what the pipe holds now; False at end of stream (then close())."""
        return read_available(self.fd, self._take)

    def _take(self, data: bytes) -> bool:
        self.file.write(data)  # a full disk drops and counts: the writer is never blocked
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
        if self.file_fd >= 0:
            self.file.mark()
        for fd in (self.fd, self.file_fd):
            if fd >= 0:
                os.close(fd)
