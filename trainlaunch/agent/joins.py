"""Whether the other nodes of a multi-node world turned up: one line when one is late.

A static world across nodes (one command per node, or every node started by a backend) waits
in silence while a node is missing: node 0's ranks block in ``init_process_group`` until the
last rank connects. So each agent announces itself in node 0's store (the one node 0's agent
hosts for the ranks): node K > 0 connects with the torch-free client and ADDs
``trainlaunch/joined/<K>``; node 0 looks for those keys in its own store after every wake-up
(a join is a store request: it wakes node 0's loop). When the world is not complete
``NOTICE_S`` after the attempt started, the agent says so on its stderr, once, and again
rarely while it goes on (``REPEAT_S``), and records ``waiting`` in agent.json for ``status``:

    node 0 of 2 waiting for 1 more node at 127.0.0.1:29511
    node 1 of 2 waiting for node 0 at 127.0.0.1:29511

and, when the wait ends after such a line, how long it took. Event-driven like the rest of
the agent: the only timers are the notices' and node K's reconnects while node 0's store is
not up (every ``RETRY_S``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import socket
import time
from collections.abc import Callable
from typing import Any

from trainlaunch.agent.storeclient import Reply, StoreClient, StoreClosed
from trainlaunch.agent.tcpstore import TCPStoreServer

NOTICE_S = 5.0  # the first line: a world is usually complete well within this
REPEAT_S = (60.0, 300.0, 900.0)  # later lines, seconds after the start; then every 15 min
RETRY_S = 0.5  # node K: how often it tries node 0's store until it answers
KEY = "trainlaunch/joined/"


def key(node_rank: int) -> str:
    """The key node ``node_rank``'s agent adds in node 0's store when it is up."""
    return f"{KEY}{node_rank}"


def nodes(n: int) -> str:
    """``1 more node``, ``2 more nodes``."""
    return f"{n} more node" + ("" if n == 1 else "s")


def duration(seconds: float) -> str:
    """``45s``, ``12m``, ``2h05m`` ."""
    from trainlaunch.diagnosis.values import duration as text

    return text(seconds)


class _Client(StoreClient):
    """The announcing connection: a store that goes away is a reason to dial again, never an
    error of the agent's loop."""

    owner: Joins

    def on_ready(self, events: int) -> None:
        try:
            super().on_ready(events)
        except StoreClosed:
            self.owner.lost()


class Joins:
    """One attempt's view of the other nodes (nothing to do for a single node)."""

    def __init__(
        self,
        node_rank: int,
        nnodes: int,
        host: str,
        port: int,
        sel: selectors.BaseSelector,
        note: Callable[[str], None],
        record: Callable[[dict[str, Any] | None], None],
        store: TCPStoreServer | None = None,
    ) -> None:
        self.node, self.nnodes, self.host, self.port = node_rank, nnodes, host, port
        self.sel, self.note, self.record, self.store = sel, note, record, store
        self.started = time.monotonic()
        self.repeats = list(REPEAT_S)
        self.next_notice = self.started + NOTICE_S
        self.told = False  # a waiting line was printed: say when the wait ends
        self.done = nnodes <= 1
        self.sock: socket.socket | None = None  # node K: connecting
        self.client: _Client | None = None  # node K: connected, announcing
        self.reply: Reply | None = None
        self.next_dial = self.started
        self.failure = ""  # node K: why node 0's store did not answer the last time
        if not self.done and self.node != 0:
            self._dial()
        self.tick()

    # -- the agent's loop ---------------------------------------------------------------------

    def timeout(self) -> float | None:
        """Seconds until something is due (None: nothing will be, only events)."""
        if self.done:
            return None
        due = self.next_notice
        if self.node != 0 and self.sock is None and self.client is None:
            due = min(due, self.next_dial)
        return max(0.0, due - time.monotonic())

    def tick(self) -> None:
        """After every wake-up: see whether the world is complete; dial, tell when due."""
        if self.done:
            return
        now = time.monotonic()
        if self.node == 0:
            missing = self._missing()
            if not missing:
                return self._complete(now)
        else:
            if self.reply is not None and self.reply.done:
                return self._complete(now)
            if self.sock is None and self.client is None and now >= self.next_dial:
                self._dial()
                if self.done:
                    return
            missing = [0]
        if now >= self.next_notice:
            self._tell(now, missing)

    def on_ready(self, events: int) -> None:
        """Node K's connection attempt finished (writable): announce, or dial again later."""
        sock = self.sock
        if sock is None:
            return
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(sock)
        self.sock = None
        if err:
            self.failure = os.strerror(err)
            sock.close()
            self.next_dial = time.monotonic() + RETRY_S
            return
        self._announce(sock)

    def lost(self) -> None:
        """Node 0's store closed the announcing connection: dial again later."""
        if self.client is not None:
            self.client.close()
        self.client, self.reply = None, None
        self.next_dial = time.monotonic() + RETRY_S

    def close(self) -> None:
        """The attempt ended: drop the connection, stop telling."""
        self.done = True
        if self.sock is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(self.sock)
            self.sock.close()
            self.sock = None
        if self.client is not None:
            self.client.close()
            self.client = None

    # -- node K ----------------------------------------------------------------------------------

    def _dial(self) -> None:
        """Start a non-blocking connection to node 0's store (the loop keeps running)."""
        try:
            family, kind, proto, _, addr = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM
            )[0]
            sock = socket.socket(family, kind, proto)
        except OSError as e:
            self.failure = e.strerror or str(e)
            self.next_dial = time.monotonic() + RETRY_S
            return
        sock.setblocking(False)
        err = sock.connect_ex(addr)
        if err == 0:
            self._announce(sock)
        elif err in (errno.EINPROGRESS, errno.EAGAIN):
            self.sock = sock
            self.sel.register(sock, selectors.EVENT_WRITE, self)
        else:
            self.failure = os.strerror(err)
            sock.close()
            self.next_dial = time.monotonic() + RETRY_S

    def _announce(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            client = _Client(sock, self.sel)
            client.owner = self
            self.client = client
            self.reply = client.add(key(self.node), 1)
        except StoreClosed:
            self.lost()

    # -- both --------------------------------------------------------------------------------------

    def _missing(self) -> list[int]:
        assert self.store is not None
        data = self.store.data
        return [k for k in range(1, self.nnodes) if key(k).encode() not in data]

    def _where(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def _line(self, missing: list[int]) -> str:
        who = f"node {self.node} of {self.nnodes}"
        if self.node != 0:
            why = f" ({self.failure[:1].lower()}{self.failure[1:]})" if self.failure else ""
            return f"{who} waiting for node 0 at {self._where()}{why}"
        from trainlaunch.ranklist import rank_list

        which = f" (node {rank_list(missing)})" if self.nnodes > 2 else ""
        return f"{who} waiting for {nodes(len(missing))}{which} at {self._where()}"

    def _tell(self, now: float, missing: list[int]) -> None:
        line = self._line(missing)
        waited = now - self.started
        if self.told:
            self.note(f"{line.replace(' waiting ', ' still waiting ', 1)} ({duration(waited)})")
        else:
            self.note(line)
        self.told = True
        self.record(
            {
                "line": line,
                "since": time.time() - waited,
                "missing": missing,
                "node_rank": self.node,
                "nnodes": self.nnodes,
                "at": self._where(),
            }
        )
        self.next_notice = self.started + self.repeats.pop(0) if self.repeats else now + 900.0
        if self.next_notice <= now:
            self.next_notice = now + 900.0

    def _complete(self, now: float) -> None:
        if self.told:
            waited = duration(now - self.started)
            if self.node == 0:
                self.note(
                    f"node 0 of {self.nnodes}: all {self.nnodes} nodes joined (after {waited})"
                )
            else:
                self.note(
                    f"node {self.node} of {self.nnodes}: reached node 0 at {self._where()} "
                    f"(after {waited})"
                )
            self.record(None)
        self.close()
