"""A torch-free c10d TCPStore server, so the node agent hosts the store as torchrun's agent does.

torchrun's rank-0 agent hosts the TCPStore its workers meet at (``MASTER_ADDR:MASTER_PORT``,
``TORCHELASTIC_USE_AGENT_STORE=True``), so the store outlives rank 0. This server speaks the
same wire protocol as torch 2.13's clients (wire.py) inside the agent's own loop: no thread,
no torch import, no extra process. Its sockets live in an epoll set of their own, which is
one file descriptor in the agent's selector; each wake-up serves every ready connection and
sends each connection's replies in one write.

What torch's server does not do, this one does (docs/reliability.md, "The c10d store"):
it listens on loopback only when the ranks can only be on this host (listen.py); it refuses
connections that another local user opened (peers.py); and every request is checked against
limits (wire.py), so a broken or hostile client loses its own connection and nothing else.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import selectors
import socket
import sys
from collections.abc import Callable

from trainlaunch.agent.tcpstore import handlers, listen
from trainlaunch.agent.tcpstore.peers import PeerOwners, Unsupported, is_loopback
from trainlaunch.agent.tcpstore.poller import IN, OUT, Poller
from trainlaunch.agent.tcpstore.wire import (
    MAGIC,
    QUERIES,
    U32,
    VALIDATE,
    Bad,
    Incomplete,
    Limits,
)

_RECV = 1 << 18  # one read's buffer, allocated once (a fresh 256 KiB bytes per read is an mmap)


class Conn:
    """One client connection: its buffers and the keys it waits for."""

    __slots__ = ("sock", "fd", "inbuf", "need", "out", "outlen", "writing", "validated", "awaited")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.inbuf = bytearray()  # the start of a request that is not all here yet
        self.need = 0  # bytes inbuf must hold before the request is worth parsing again
        self.out: list[bytes] = []  # replies not yet sent
        self.outlen = 0
        self.writing = False  # waiting for the socket to take more
        self.validated = False
        self.awaited: set[bytes] = set()  # keys a WAIT or BARRIER still needs


class TCPStoreServer(handlers.Handlers):
    """The store's state and its sockets, driven by the owner's selector."""

    def __init__(
        self,
        sel: selectors.BaseSelector,
        port: int = 0,
        *,
        loopback: bool = False,
        same_user: bool = True,
        note: Callable[[str], None] | None = None,
        limits: Limits | None = None,
    ) -> None:
        super().__init__(limits or Limits())
        self.sel = sel
        self.note = note
        self.listeners = listen.open_listeners(port, loopback)
        self.port = int(self.listeners[0].getsockname()[1])
        self.poller = Poller()
        self._listening = {s.fileno(): s for s in self.listeners}
        # a listener on one address knows every connection's local end without asking
        self._local = {fd: s.getsockname()[:2] for fd, s in self._listening.items() if loopback}
        for fd in self._listening:
            self.poller.register(fd, IN)
        self.sel.register(self.poller.fileno(), selectors.EVENT_READ, self)
        self.uid = os.geteuid()
        linux = sys.platform.startswith("linux")
        self.owners: PeerOwners | None = PeerOwners() if same_user and linux else None
        self.conns: dict[int, Conn] = {}
        self.buffered = 0  # bytes in every connection's inbuf
        self.refused = 0  # connections another user opened
        self.dropped = 0  # connections closed for breaking the protocol or a limit
        self._refused_uids: set[int] = set()
        self._dirty: list[Conn] = []  # connections with replies to send
        self._spare: int | None = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        self._table = self.table()
        self._rbuf = memoryview(bytearray(_RECV))
        assert len(self._table) == QUERIES

    @property
    def clients(self) -> int:
        """Open client connections (a worker closes its own when it exits)."""
        return len(self.conns)

    def on_ready(self, key: object = None, events: int = 0) -> None:
        """Serve everything that is ready (the owner's selector saw our epoll set readable)."""
        for fd, ev in self.poller.poll():
            conn = self.conns.get(fd)
            if conn is None:
                listener = self._listening.get(fd)
                if listener is not None:
                    self._accept(listener)
                continue
            try:
                if ev & OUT:
                    self._flush(conn)
                if ev & ~OUT:
                    self._read(conn)
            except (Bad, OSError):
                self._drop(conn, bad=True)
            except Exception:  # noqa: BLE001 - one client's bytes must never stop the agent
                self._drop(conn, bad=True)
        self._flush_dirty()

    def reset(self) -> None:
        """A fresh store for a new attempt: every key and client of the old one go."""
        for conn in list(self.conns.values()):
            self._drop(conn)
        self.clear()
        self.buffered = 0

    def close(self) -> None:
        """Stop serving: close every socket."""
        self.reset()
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(self.poller.fileno())
        for s in self.listeners:
            s.close()
        self.poller.close()
        if self.owners is not None:
            self.owners.close()
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None

    # -- connections -------------------------------------------------------------------------

    def _accept(self, listener: socket.socket) -> None:
        family = int(listener.family)
        here = self._local.get(listener.fileno())
        while True:
            try:
                # the C accept: socket.accept() converts family and type to enums each call
                fd, addr = listener._accept()  # type: ignore[attr-defined]
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE):
                    self._out_of_fds(listener)
                    return
                continue  # e.g. ECONNABORTED: that client is gone, the next may be waiting
            sock = socket.socket(family, socket.SOCK_STREAM, 0, fd)
            try:
                if not self._admit(sock, addr, here):
                    sock.close()
                    continue
                sock.setblocking(False)  # TCP_NODELAY comes from the listener
                self.poller.register(fd, IN)  # may fail (epoll's max_user_watches): refused
            except OSError:
                sock.close()
                continue
            self.conns[fd] = Conn(sock)

    def _admit(
        self, sock: socket.socket, addr: tuple[str, int], here: tuple[str, int] | None
    ) -> bool:
        """Whether this user's own process opened the connection, where the system can tell."""
        if self.owners is None:
            return True
        try:
            uid = self.owners.owner(addr[:2], here or sock.getsockname()[:2])
        except Unsupported:
            self.owners = None  # the system cannot tell (documented): admit, as torch does
            return True
        except (OSError, ValueError):
            return False  # this one cannot be checked: refused (its client retries)
        if uid is None:  # not on this host, unless its address says it is (then it is gone)
            return not (is_loopback(addr[0]) or self.owners.is_local(addr[0]))
        if uid == self.uid:
            return True
        self.refused += 1
        if self.note is not None and uid not in self._refused_uids:
            self._refused_uids.add(uid)
            self.note(
                f"refused a c10d store connection from uid {uid} ({addr[0]} port {addr[1]}): "
                f"only uid {self.uid}'s processes may use this job's store"
            )
        return False

    def _out_of_fds(self, listener: socket.socket) -> None:
        """EMFILE: raise the soft limit to the hard one; at the hard one, refuse one client
        (libuv's trick: a spare descriptor makes room to accept and close it), so that a
        full backlog never spins the loop."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
                return
        if self._spare is None:
            return
        os.close(self._spare)
        try:
            sock, _ = listener.accept()
            sock.close()
        except OSError:
            pass
        self._spare = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)

    def _drop(self, conn: Conn, bad: bool = False) -> None:
        if self.conns.get(conn.fd) is not conn:
            return  # gone already (its descriptor may serve a newer connection by now)
        del self.conns[conn.fd]
        self.dropped += bad
        self.forget_wait(conn)
        self.buffered -= len(conn.inbuf)
        conn.inbuf = bytearray()
        conn.out = []
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(conn.fd)
        conn.sock.close()

    # -- bytes in, bytes out -------------------------------------------------------------------

    def _read(self, conn: Conn) -> None:
        try:
            n = conn.sock.recv_into(self._rbuf)
        except (BlockingIOError, InterruptedError):
            return
        if not n:
            raise Bad("closed by the client")
        data = self._rbuf[:n].tobytes()
        if conn.inbuf:
            conn.inbuf += data
            self.buffered += len(data)
            if len(conn.inbuf) > self.limits.request or self.buffered > self.limits.buffered:
                raise Bad("a request past the size limit")
            if len(conn.inbuf) < conn.need:
                return  # still not all here: do not parse the start again
            buf = bytes(conn.inbuf)
            self.buffered -= len(conn.inbuf)
            conn.inbuf = bytearray()
        else:
            buf = data
        at = self._serve(conn, buf)
        if at < len(buf):
            rest = len(buf) - at
            if conn.need > self.limits.request or self.buffered + rest > self.limits.buffered:
                raise Bad("a request past the size limit")
            conn.inbuf = bytearray(buf[at:])
            self.buffered += rest

    def _serve(self, conn: Conn, buf: bytes) -> int:
        """Answer every complete request in buf, in order; the offset of the first that is not
        complete (its start stays in inbuf, conn.need says how much it needs)."""
        at, end, table = 0, len(buf), self._table
        start = 0
        try:
            while at < end:
                start = at
                query = buf[at]
                if not conn.validated:
                    if query != VALIDATE:
                        raise Bad("not a c10d TCPStore client")
                    if at + 5 > end:
                        raise Incomplete(at + 5)
                    if U32.unpack_from(buf, at + 1)[0] != MAGIC:
                        raise Bad("not a c10d TCPStore client")
                    conn.validated = True
                    at += 5
                    continue
                handler = table[query] if query < QUERIES else None
                if handler is None:
                    raise Bad(f"unknown query {query}")
                at = handler(conn, buf, at + 1)
        except Incomplete as e:
            conn.need = (int(e.args[0]) if e.args else end + 1) - start
            return start
        conn.need = 0
        return at

    def send(self, conn: Conn, data: bytes) -> None:
        """Queue a reply; every queued reply goes out when this wake-up ends."""
        if not conn.out:
            self._dirty.append(conn)
        conn.out.append(data)
        conn.outlen += len(data)

    def _flush_dirty(self) -> None:
        dirty, self._dirty = self._dirty, []
        for conn in dirty:
            if self.conns.get(conn.fd) is not conn or not conn.out:
                continue
            try:
                if conn.outlen > self.limits.reply:
                    raise Bad("replies pile up unread")
                self._flush(conn)
            except (Bad, OSError):
                self._drop(conn, bad=True)

    def _flush(self, conn: Conn) -> None:
        out = conn.out
        data = out[0] if len(out) == 1 else b"".join(out)
        try:
            n = conn.sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        if n == len(data):
            conn.out, conn.outlen = [], 0
            if conn.writing:
                conn.writing = False
                self.poller.modify(conn.fd, IN)
            return
        rest = data[n:]
        conn.out, conn.outlen = [rest], len(rest)
        if not conn.writing:
            conn.writing = True
            self.poller.modify(conn.fd, IN | OUT)
