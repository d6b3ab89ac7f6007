"""The file side of a metric logger: the buffer, whole-line writes, and flushing at shutdown.

A :class:`Sink` owns the file descriptor, the lock and the buffered entries, and holds no
reference to its :class:`~trainlaunch.rank.metrics.MetricLogger`, so that

* a logger that is garbage collected, or still open at interpreter exit, is drained by a
  ``weakref.finalize`` (which runs at exit too), and
* a SIGTERM handler (installed once, from the main thread, chaining to the previous handler)
  can drain every live sink before the process goes away.

Durability: each drain is one ``os.write`` of whole lines to an ``O_APPEND`` descriptor (no
Python-side buffer), so records leave the process as soon as the buffer drains; a crash loses at
most the records still buffered, and cannot tear a line that was already written.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from types import FrameType
from typing import Any

from trainlaunch.rank import _encode, _render


class Sink:
    """An open JSON Lines file, its lock and its buffer."""

    def __init__(self, path: str, append: bool, fsync_each_write: bool) -> None:
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        self.new_file = not os.path.exists(path)
        # O_APPEND even when truncating: every write lands at the end, never inside a hole.
        self.fd = os.open(path, flags | (0 if append else os.O_TRUNC), 0o644)
        self.path = path
        self.fsync_each_write = fsync_each_write
        self.lock = threading.RLock()  # re-entrant only so the SIGTERM handler can test ownership
        self.entries: list[_render.Entry] = []
        self.schemas: list[_encode.Schema] = []  # fast-path entries end with an index into this
        self.closed = False
        self.pid = os.getpid()
        _live.add(self)
        _install_sigterm_handler()

    def drain_locked(self, fsync: bool = False) -> None:
        """Write the buffer out (caller holds the lock); the buffer is empty afterwards."""
        batch = self.entries[:]
        # Removed before writing (a failing write must not repeat lines), and only what was
        # taken: log() appends without the lock, so a record may have arrived since the copy.
        del self.entries[: len(batch)]
        if self.pid != os.getpid():
            return  # a forked child must not write its copy of the parent's buffer
        error = None
        if batch:
            text, error = _render.render(batch, self.schemas)
            # backslashreplace turns a lone surrogate into a \\udXXX escape: valid JSON in a string.
            self._write(text.encode("utf-8", "backslashreplace"))
        if fsync or (batch and self.fsync_each_write):
            self._fsync()
        if error is not None:
            raise error  # once, after the other records are safe

    def flush(self, fsync: bool = True) -> None:
        """Drain the buffer and, by default, fsync the file."""
        try:
            with self.lock:
                if not self.closed:
                    self.drain_locked(fsync=fsync)
        finally:
            run_pending()

    def close(self) -> None:
        """Drain, then close the file; a second call does nothing."""
        try:
            with self.lock:
                if self.closed:
                    return
                self.closed = True
                _live.discard(self)
                try:
                    self.drain_locked(fsync=self.fsync_each_write)
                finally:
                    os.close(self.fd)
        finally:
            run_pending()  # also when a garbage-collected logger is closed by its finalizer

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # regular files rarely write short, but a signal can make them
            written = os.write(self.fd, view)
            view = view[written:]

    def _fsync(self) -> None:
        os.fsync(self.fd)
        if self.new_file:  # a new file's directory entry is only durable once its dir is synced
            self.new_file = False
            dir_fd = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


# --- shutdown ------------------------------------------------------------------------------------
_live: set[Sink] = set()
_handler_installed = False
_previous_handler: Any = None
_pending: tuple[int, FrameType | None] | None = None  # a SIGTERM that arrived mid-operation


def _install_sigterm_handler() -> None:
    global _handler_installed, _previous_handler
    if _handler_installed or threading.current_thread() is not threading.main_thread():
        return  # signal.signal only works in the main thread; a later logger will retry
    previous = signal.getsignal(signal.SIGTERM)
    if previous is None:
        return  # installed from C: we could not chain to it, so leave it alone
    _previous_handler = previous
    signal.signal(signal.SIGTERM, _on_sigterm)
    _handler_installed = True


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global _pending
    for sink in list(_live):
        # Handlers run in the main thread between bytecodes. If that thread is inside this
        # sink's critical section, draining now could see a half-updated buffer: let the
        # interrupted method finish and call run_pending() once it has released the lock.
        if sink.lock._is_owned():  # type: ignore[attr-defined]
            _pending = (signum, frame)
            return
    _finish(signum, frame)


def run_pending() -> None:
    """Complete a SIGTERM that was deferred while the main thread held a sink's lock."""
    global _pending
    if _pending is None:
        return
    pending, _pending = _pending, None
    if pending is not None:
        _finish(*pending)


def flush_all(fsync: bool) -> None:
    """Drain every live sink of this process."""
    for sink in list(_live):
        # Runs in a signal handler or at exit: never raise, and one failing file must not
        # stop the others from being saved.
        with contextlib.suppress(Exception):
            sink.flush(fsync=fsync)


def _finish(signum: int, frame: FrameType | None) -> None:
    flush_all(fsync=True)  # SIGTERM usually means preemption: make the records durable
    previous = _previous_handler
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        # The default action is to die by the signal: re-deliver it so the exit status says so.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _after_fork_in_child() -> None:
    _live.clear()  # the parent's files belong to the parent


os.register_at_fork(after_in_child=_after_fork_in_child)
