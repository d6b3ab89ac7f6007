"""The store's own readiness set: epoll on Linux, the platform's selector elsewhere.

Either way it is one pollable file descriptor, which the agent's selector watches; the store
then asks it which of its sockets are ready. Keeping the store's thousands of sockets out of
the agent's selector keeps the agent's own events (workers' pipes, exits, signals) cheap.
"""

from __future__ import annotations

import select
import selectors

IN, OUT = 1, 4  # EPOLLIN, EPOLLOUT (the selector fallback maps them)


class _SelectorPoller:
    """The same four calls over selectors.DefaultSelector (kqueue on BSD and macOS)."""

    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()

    @staticmethod
    def _events(mask: int) -> int:
        return (selectors.EVENT_READ if mask & IN else 0) | (
            selectors.EVENT_WRITE if mask & OUT else 0
        )

    def register(self, fd: int, mask: int) -> None:
        self._sel.register(fd, self._events(mask))

    def modify(self, fd: int, mask: int) -> None:
        self._sel.modify(fd, self._events(mask))

    def unregister(self, fd: int) -> None:
        self._sel.unregister(fd)

    def poll(self, timeout: float = 0) -> list[tuple[int, int]]:
        return [
            (
                key.fd,
                (IN if ev & selectors.EVENT_READ else 0)
                | (OUT if ev & selectors.EVENT_WRITE else 0),
            )
            for key, ev in self._sel.select(timeout)
        ]

    def fileno(self) -> int:
        return self._sel.fileno()  # type: ignore[attr-defined]

    def close(self) -> None:
        self._sel.close()


class Poller:
    """register / modify / unregister / poll over the store's sockets."""

    def __init__(self) -> None:
        if hasattr(select, "epoll"):
            self._impl: select.epoll | _SelectorPoller = select.epoll()
        else:
            self._impl = _SelectorPoller()
        self.register = self._impl.register
        self.modify = self._impl.modify
        self.unregister = self._impl.unregister
        self.fileno = self._impl.fileno
        self.close = self._impl.close

    def poll(self) -> list[tuple[int, int]]:
        """Every ready socket and its events, without blocking."""
        return self._impl.poll(0)
