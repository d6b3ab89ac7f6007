"""A torch-free c10d TCPStore client driven by the node agent's own selector loop.

The preflight's agents meet in node 0's store (the one node 0's agent hosts for the ranks),
with the protocol's plain requests only: VALIDATE, PING, SET, GET, ADD and WAIT. Requests are
queued and written without blocking; replies are read when the socket is readable and handed
to their :class:`Reply` in order (one connection answers in order). Node 0's agent talks to
its own store this way too, so its loop keeps serving the others while it waits.
"""

from __future__ import annotations

import collections
import contextlib
import selectors
import socket
import struct
from collections.abc import Callable

from trainlaunch.agent.tcpstore.wire import ADD, GET, MAGIC, PING, SET, VALIDATE, WAIT

_U32, _U64, _I64 = struct.Struct("<I"), struct.Struct("<Q"), struct.Struct("<q")
_PING_NONCE = 0x7072_6566  # "pref": any u32; the server echoes it


class StoreClosed(ConnectionError):
    """The store closed the connection (or answered what a c10d store never would)."""


class Reply:
    """One request's answer, filled in when it arrives."""

    def __init__(self, parse: Callable[[bytearray], tuple[object, int] | None]) -> None:
        self.parse = parse
        self.done = False
        self.value: object = None


def _item(data: bytes) -> bytes:
    return _U64.pack(len(data)) + data


def _fixed(s: struct.Struct) -> Callable[[bytearray], tuple[object, int] | None]:
    return lambda buf: (s.unpack_from(buf)[0], s.size) if len(buf) >= s.size else None


def _bytes_item(buf: bytearray) -> tuple[object, int] | None:
    if len(buf) < 8:
        return None
    n = int(_U64.unpack_from(buf)[0])
    return (bytes(buf[8 : 8 + n]), 8 + n) if len(buf) >= 8 + n else None


def _one_byte(buf: bytearray) -> tuple[object, int] | None:
    return (buf[0], 1) if buf else None


class StoreClient:
    """One connection to a c10d store; register it in a selector and call :meth:`on_ready`."""

    def __init__(self, sock: socket.socket, sel: selectors.BaseSelector) -> None:
        self.sock, self.sel = sock, sel
        self.inbuf, self.outbuf = bytearray(), bytearray()
        self.replies: collections.deque[Reply] = collections.deque()
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ, self)
        self._send(bytes([VALIDATE]) + _U32.pack(MAGIC))
        self.ping = self._request(bytes([PING]) + _U32.pack(_PING_NONCE), _fixed(_U32))

    @classmethod
    def connect(
        cls, host: str, port: int, sel: selectors.BaseSelector, timeout: float = 5.0
    ) -> StoreClient:
        """Open a connection (OSError when nothing accepts it: refused, unreachable, timeout)."""
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock, sel)

    @property
    def validated(self) -> bool:
        """The other end answered the ping with our nonce: it is a c10d store."""
        return self.ping.done

    def set(self, key: str, value: bytes) -> None:
        """SET (no reply)."""
        self._send(bytes([SET]) + _item(key.encode()) + _item(value))

    def get(self, key: str) -> Reply:
        """GET a key that exists (WAIT for it first: a store drops a GET of a missing key)."""
        return self._request(bytes([GET]) + _item(key.encode()), _bytes_item)

    def add(self, key: str, delta: int) -> Reply:
        """ADD: the new value."""
        return self._request(bytes([ADD]) + _item(key.encode()) + _I64.pack(delta), _fixed(_I64))

    def wait(self, keys: list[str]) -> Reply:
        """WAIT until every key exists (answered once they do)."""
        body = _U64.pack(len(keys)) + b"".join(_item(k.encode()) for k in keys)
        return self._request(bytes([WAIT]) + body, _one_byte)

    def on_ready(self, events: int) -> None:
        """Write what is queued, read what arrived; StoreClosed if the store went away."""
        try:
            if events & selectors.EVENT_WRITE:
                self._flush()
            if events & selectors.EVENT_READ:
                data = self.sock.recv(1 << 16)
                if not data:
                    raise StoreClosed("the store closed the connection")
                self.inbuf += data
                self._parse()
        except BlockingIOError:
            pass
        except StoreClosed:
            raise
        except OSError as e:
            raise StoreClosed(e.strerror or str(e)) from None

    def close(self) -> None:
        """Unregister and close the socket."""
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(self.sock)
        self.sock.close()

    def _request(
        self, data: bytes, parse: Callable[[bytearray], tuple[object, int] | None]
    ) -> Reply:
        reply = Reply(parse)
        self.replies.append(reply)
        self._send(data)
        return reply

    def _send(self, data: bytes) -> None:
        self.outbuf += data
        self._flush()

    def _flush(self) -> None:
        while self.outbuf:
            try:
                n = self.sock.send(self.outbuf)
            except BlockingIOError:
                break
            except OSError as e:  # reset, broken pipe: the store is gone
                raise StoreClosed(e.strerror or str(e)) from None
            del self.outbuf[:n]
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.outbuf else 0)
        self.sel.modify(self.sock, events, self)

    def _parse(self) -> None:
        while self.replies:
            got = self.replies[0].parse(self.inbuf)
            if got is None:
                return
            value, used = got
            del self.inbuf[:used]
            reply = self.replies.popleft()
            reply.value, reply.done = value, True
            if reply is self.ping and value != _PING_NONCE:
                raise StoreClosed("what answers there is not a c10d store")
        if self.inbuf:
            raise StoreClosed("the store sent more than was asked")
