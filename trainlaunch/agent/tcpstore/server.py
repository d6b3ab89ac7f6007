"""A torch-free c10d TCPStore server, so the node agent hosts the store as torchrun's agent does.

torchrun's rank-0 agent hosts the TCPStore its workers meet at (``MASTER_ADDR:MASTER_PORT``,
``TORCHELASTIC_USE_AGENT_STORE=True``), so the store outlives rank 0. This module speaks the
same wire protocol as torch 2.13's ``TCPStore`` clients (``TCPStoreLibUvBackend.cpp``), inside
the agent's own selector loop: no thread, no torch import, no extra process.

Wire format (little endian): every request is one query byte then its arguments; a string or
value is ``u64 length + bytes``, a list is ``u64 count + items``. A client first sends
VALIDATE (the magic number, no reply), then PING (a u32 nonce, echoed back).
"""

from __future__ import annotations

import collections
import contextlib
import selectors
import socket
import struct
from collections.abc import Callable

MAGIC = 0x3C85F7CE  # c10d::detail::validationMagicNumber
(
    VALIDATE,
    SET,
    COMPARE_SET,
    GET,
    ADD,
    CHECK,
    WAIT,
    GETNUMKEYS,
    DELETE_KEY,
    APPEND,
    MULTI_GET,
    MULTI_SET,
    CANCEL_WAIT,
    PING,
    QUEUE_PUSH,
    QUEUE_POP,
    QUEUE_LEN,
    LIST_KEYS,
) = range(18)
READY, NOT_READY = b"\x00", b"\x01"  # CheckResponseType
STOP_WAITING, WAIT_CANCELED = b"\x00", b"\x01"  # WaitResponseType
_U32, _U64, _I64 = struct.Struct("<I"), struct.Struct("<Q"), struct.Struct("<q")
_MAX_ITEM = 1 << 31  # a length above this is a broken client, not a value


class _Incomplete(Exception):
    """The request is not all here yet."""


class _Bad(Exception):
    """The client broke the protocol: its connection is closed (as torch's server does)."""


class _Request:
    """Reads one request's arguments from a connection's input buffer."""

    def __init__(self, buf: bytearray) -> None:
        self.buf, self.at = buf, 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.buf):
            raise _Incomplete
        out = bytes(self.buf[self.at : self.at + n])
        self.at += n
        return out

    def u32(self) -> int:
        return int(_U32.unpack(self.take(4))[0])

    def u64(self) -> int:
        n = int(_U64.unpack(self.take(8))[0])
        if n > _MAX_ITEM:
            raise _Bad(f"length {n}")
        return n

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def item(self) -> bytes:
        return self.take(self.u64())

    def items(self) -> list[bytes]:
        return [self.item() for _ in range(self.u64())]


def _item(value: bytes) -> bytes:
    return _U64.pack(len(value)) + value


class _Conn:
    """One client connection: its buffers and the keys it waits for."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.validated = False
        self.awaited: set[bytes] = set()  # keys a WAIT still needs


class TCPStoreServer:
    """The store's state and its sockets, driven by the owner's selector."""

    def __init__(self, sel: selectors.BaseSelector, port: int = 0) -> None:
        self.sel = sel
        self.listener = _listen(port)
        self.port = int(self.listener.getsockname()[1])
        self.sel.register(self.listener, selectors.EVENT_READ, self)
        self.conns: dict[int, _Conn] = {}
        self.data: dict[bytes, bytes] = {}
        self.queues: dict[bytes, collections.deque[bytes]] = {}
        self.waiters: dict[bytes, list[_Conn]] = {}

    @property
    def clients(self) -> int:
        """Open client connections (a worker closes its own when it exits)."""
        return len(self.conns)

    def on_ready(self, key: selectors.SelectorKey, events: int) -> None:
        """Handle what the selector reported for one of our sockets."""
        if key.fileobj is self.listener:
            self._accept()
            return
        conn = self.conns.get(key.fd)
        if conn is None:
            return
        try:
            if events & selectors.EVENT_WRITE:
                self._flush(conn)
            if events & selectors.EVENT_READ:
                data = conn.sock.recv(1 << 16)
                if not data:
                    raise _Bad("closed")
                conn.inbuf += data
                self._serve(conn)
                self._flush(conn)
        except BlockingIOError:
            pass
        except (_Bad, OSError, ValueError):
            self._drop(conn)

    def reset(self) -> None:
        """A fresh store for a new attempt: every key and client of the old one go."""
        for conn in list(self.conns.values()):
            self._drop(conn)
        self.data.clear()
        self.queues.clear()
        self.waiters.clear()

    def close(self) -> None:
        """Stop serving: close every socket."""
        self.reset()
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(self.listener)
        self.listener.close()

    # -- connections -------------------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. EMFILE: the client retries its connect
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(sock)
            self.conns[sock.fileno()] = conn
            self.sel.register(sock, selectors.EVENT_READ, self)

    def _drop(self, conn: _Conn) -> None:
        fd = conn.sock.fileno()
        if self.conns.pop(fd, None) is None:
            return
        self._forget_wait(conn)
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(conn.sock)
        conn.sock.close()

    def _flush(self, conn: _Conn) -> None:
        while conn.outbuf:
            n = conn.sock.send(conn.outbuf)  # BlockingIOError: wait for EVENT_WRITE
            del conn.outbuf[:n]
        self.sel.modify(conn.sock, selectors.EVENT_READ, self)

    def _reply(self, conn: _Conn, data: bytes) -> None:
        if not conn.outbuf and conn.sock.fileno() in self.conns:
            with contextlib.suppress(BlockingIOError):
                n = conn.sock.send(data)
                data = data[n:]
        if data:
            conn.outbuf += data
            self.sel.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, self)

    # -- requests ----------------------------------------------------------------------------

    def _serve(self, conn: _Conn) -> None:
        """Answer every complete request in the input buffer, in order."""
        while conn.inbuf:
            req = _Request(conn.inbuf)
            try:
                query = req.take(1)[0]
                if not conn.validated:
                    if query != VALIDATE or req.u32() != MAGIC:
                        raise _Bad("not a c10d TCPStore client")
                    conn.validated = True
                else:
                    handler = self._handlers().get(query)
                    if handler is None:
                        raise _Bad(f"unknown query {query}")
                    handler(conn, req)
            except _Incomplete:
                return
            del conn.inbuf[: req.at]

    def _handlers(self) -> dict[int, Callable[[_Conn, _Request], None]]:
        return {
            SET: self._set,
            COMPARE_SET: self._compare_set,
            GET: self._get,
            ADD: self._add,
            CHECK: self._check,
            WAIT: self._wait,
            GETNUMKEYS: lambda c, r: self._reply(c, _I64.pack(len(self.data))),
            DELETE_KEY: self._delete,
            APPEND: self._append,
            MULTI_GET: self._multi_get,
            MULTI_SET: self._multi_set,
            CANCEL_WAIT: self._cancel_wait,
            PING: lambda c, r: self._reply(c, _U32.pack(r.u32())),
            QUEUE_PUSH: self._queue_push,
            QUEUE_POP: self._queue_pop,
            QUEUE_LEN: lambda c, r: self._reply(c, _I64.pack(len(self.queues.get(r.item(), ())))),
            LIST_KEYS: self._list_keys,
        }

    def _present(self, key: bytes) -> bool:
        return key in self.data or bool(self.queues.get(key))

    def _store(self, key: bytes, value: bytes) -> None:
        self.data[key] = value
        self._wake(key)

    def _set(self, conn: _Conn, req: _Request) -> None:
        key, value = req.item(), req.item()
        self._store(key, value)

    def _compare_set(self, conn: _Conn, req: _Request) -> None:
        key, expected, desired = req.item(), req.item(), req.item()
        current = self.data.get(key)
        if current is None:
            if expected:
                self._reply(conn, _item(expected))  # torch's answer for a missing key
                return
            self._store(key, desired)
        elif current == expected:
            self._store(key, desired)
        self._reply(conn, _item(self.data[key]))

    def _get(self, conn: _Conn, req: _Request) -> None:
        key = req.item()
        if key not in self.data:
            raise _Bad("get of a missing key")  # clients wait for the key first
        self._reply(conn, _item(self.data[key]))

    def _add(self, conn: _Conn, req: _Request) -> None:
        key, delta = req.item(), req.i64()
        value = int(self.data.get(key, b"0")) + delta  # ValueError: not a number, as stoll
        self._store(key, str(value).encode())
        self._reply(conn, _I64.pack(value))

    def _check(self, conn: _Conn, req: _Request) -> None:
        keys = req.items()
        self._reply(conn, READY if all(self._present(k) for k in keys) else NOT_READY)

    def _wait(self, conn: _Conn, req: _Request) -> None:
        missing = {k for k in req.items() if not self._present(k)}
        if not missing:
            self._reply(conn, STOP_WAITING)
            return
        conn.awaited = missing
        for key in missing:
            self.waiters.setdefault(key, []).append(conn)

    def _wake(self, key: bytes) -> None:
        for conn in self.waiters.pop(key, []):
            conn.awaited.discard(key)
            if not conn.awaited:
                self._reply(conn, STOP_WAITING)

    def _forget_wait(self, conn: _Conn) -> None:
        for key in conn.awaited:
            others = [c for c in self.waiters.get(key, []) if c is not conn]
            if others:
                self.waiters[key] = others
            else:
                self.waiters.pop(key, None)
        conn.awaited = set()

    def _cancel_wait(self, conn: _Conn, req: _Request) -> None:
        self._forget_wait(conn)
        self._reply(conn, WAIT_CANCELED)

    def _delete(self, conn: _Conn, req: _Request) -> None:
        key = req.item()
        found = self.data.pop(key, None) is not None
        self._reply(conn, _I64.pack(int(found)))

    def _append(self, conn: _Conn, req: _Request) -> None:
        key, value = req.item(), req.item()
        self._store(key, self.data.get(key, b"") + value)

    def _multi_get(self, conn: _Conn, req: _Request) -> None:
        keys = req.items()
        if any(k not in self.data for k in keys):
            raise _Bad("multi_get of a missing key")
        self._reply(conn, b"".join(_item(self.data[k]) for k in keys))

    def _multi_set(self, conn: _Conn, req: _Request) -> None:
        pairs = [(req.item(), req.item()) for _ in range(req.u64())]
        for key, value in pairs:
            self._store(key, value)

    def _queue_push(self, conn: _Conn, req: _Request) -> None:
        key, value = req.item(), req.item()
        self.queues.setdefault(key, collections.deque()).append(value)
        self._wake(key)

    def _queue_pop(self, conn: _Conn, req: _Request) -> None:
        queue = self.queues.get(req.item())
        if not queue:
            self._reply(conn, _I64.pack(0))
            return
        self._reply(conn, _I64.pack(1) + _item(queue.popleft()))

    def _list_keys(self, conn: _Conn, req: _Request) -> None:
        keys = list(self.data)
        self._reply(conn, _U64.pack(len(keys)) + b"".join(_item(k) for k in keys))


def _listen(port: int) -> socket.socket:
    """Listen on every interface (IPv6 dual-stack where possible), as torch's server does."""
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        addr: tuple[str, int] = ("::", port)
    except OSError:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        addr = ("0.0.0.0", port)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.set_inheritable(False)
        sock.bind(addr)
        sock.listen(2048)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
