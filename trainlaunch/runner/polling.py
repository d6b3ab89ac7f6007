"""The one polling rule: for one app's description and for a sweep's (many apps at once)."""

from __future__ import annotations

import collections
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

from trainlaunch.errors import WaitTimeout

POLL_FIRST_INTERVAL = 0.02  # seconds
POLL_MAX_INTERVAL = 0.1  # seconds; Runner.poll's default cap


class Terminal(Protocol):
    """A description that says whether nothing more will happen."""

    @property
    def is_terminal(self) -> bool:
        """True once it can no longer change."""
        ...


D = TypeVar("D", bound=Terminal)


def poll(
    describe: Callable[[], D],
    timeout: float | None,
    max_interval: float,
    still: Callable[[D], str],
) -> Iterator[D]:
    """Yield describe() at each poll until (and including) the terminal one.

    The first poll is immediate, then the interval grows from POLL_FIRST_INTERVAL by half
    each time up to max_interval (a local status read costs ~1 ms, so short jobs end fast
    without busy-looping on long ones). After timeout seconds WaitTimeout (saying
    ``still(last)``) is raised instead of the next non-terminal description.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    interval = min(POLL_FIRST_INTERVAL, max_interval)
    while True:
        desc = describe()
        if desc.is_terminal:
            yield desc
            return
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimeout(
                f"{still(desc)} after {timeout:g}s",
                hint="`trainlaunch wait` again, or `trainlaunch stop` it",
            )
        yield desc
        pause = interval if deadline is None else min(interval, deadline - time.monotonic())
        nap(max(pause, 0.0))
        interval = min(interval * 1.5, max_interval)


def nap(seconds: float) -> None:
    """Sleep up to seconds, or until a child of this process exits.

    The local backend's supervisor is a child of the process that ran it: `run --wait`
    sees the app's end when the supervisor exits (right after its final record) instead of
    up to one interval later. Another child's exit only makes the next look come early;
    a child that exits while no nap is under way is seen at the next interval, as before.
    """
    if seconds <= 0:
        return
    if not hasattr(signal, "sigtimedwait") or threading.current_thread() is not (
        threading.main_thread()
    ):
        time.sleep(seconds)  # only this thread blocks SIGCHLD: another would not see it
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    try:
        signal.sigtimedwait({signal.SIGCHLD}, seconds)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def last_of(polls: Iterator[D]) -> D:
    """Run a poller to its end; its last (terminal) description."""
    return collections.deque(polls, maxlen=1)[0]


__all__ = ["POLL_FIRST_INTERVAL", "POLL_MAX_INTERVAL", "last_of", "poll"]
