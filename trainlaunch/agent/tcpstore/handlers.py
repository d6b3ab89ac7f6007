"""The store's keys, counters, queues and waiters, and one handler per request type.

Each handler parses its request from the buffer (``buf`` at offset ``at``, just after the
query byte), checks it whole against wire.py's limits, and only then changes anything, so a
request that is Bad leaves the store as it was. It returns the offset after the request.
Answers follow torch 2.13's libuv server (``TCPStoreLibUvBackend.cpp``) byte for byte, except
where torch would overflow int64 or grow without bound (wire.py says where).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from trainlaunch.agent.tcpstore.wire import (
    I64,
    KEY_OVERHEAD,
    MAX_KEY,
    MAX_VALUE,
    NOT_READY,
    READY,
    STOP_WAITING,
    U64,
    WAIT_CANCELED,
    Bad,
    Incomplete,
    Limits,
    added,
    counter,
    item,
    read_count,
    read_i64,
    read_item,
    read_keys,
)

Handler = Callable[[Any, bytes, int], int]


class Handlers:
    """The store's state and request handlers; the server (server.py) adds the sockets."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.data: dict[bytes, bytes] = {}
        self.queues: dict[bytes, collections.deque[bytes]] = {}
        self.waiters: dict[bytes, dict[Any, None]] = {}  # key -> connections, in arrival order
        self.held = 0  # bytes charged against limits.held

    def send(self, conn: Any, data: bytes) -> None:
        """Queue a reply to conn (the server's)."""
        raise NotImplementedError

    def table(self) -> list[Handler | None]:
        """The handler of each query type, by its number (VALIDATE is the server's)."""
        return [
            None,
            self._set,
            self._compare_set,
            self._get,
            self._add,
            self._check,
            self._wait,
            self._num_keys,
            self._delete,
            self._append,
            self._multi_get,
            self._multi_set,
            self._cancel_wait,
            self._ping,
            self._queue_push,
            self._queue_pop,
            self._queue_len,
            self._list_keys,
            self._barrier,
        ]

    def clear(self) -> None:
        """Forget every key, queue and waiter."""
        self.data.clear()
        self.queues.clear()
        self.waiters.clear()
        self.held = 0

    # -- state ---------------------------------------------------------------------------------

    def _charge(self, grow: int) -> None:
        if self.held + grow > self.limits.held:
            raise Bad(f"the store is full ({self.limits.held} bytes)")
        self.held += grow

    def _put(self, key: bytes, value: bytes, wake: bool = True) -> None:
        old = self.data.get(key)
        self._charge(
            len(value) - len(old) if old is not None else len(key) + len(value) + KEY_OVERHEAD
        )
        self.data[key] = value
        if wake and key in self.waiters:
            self._wake(key)

    def _present(self, key: bytes) -> bool:
        return key in self.data or bool(self.queues.get(key))

    def _wake(self, key: bytes, one: bool = False) -> None:
        """Answer the connections whose WAIT this key completes (one: the first only)."""
        waiting = self.waiters.get(key)
        while waiting:
            conn = next(iter(waiting))
            del waiting[conn]
            conn.awaited.discard(key)
            if not conn.awaited:
                self.send(conn, STOP_WAITING)
                if one:
                    break
        if not waiting:
            self.waiters.pop(key, None)

    def _await(self, conn: Any, keys: list[bytes]) -> None:
        if conn.awaited:
            raise Bad("a WAIT while another is pending")
        conn.awaited = set(keys)
        for key in conn.awaited:
            self.waiters.setdefault(key, {})[conn] = None

    def forget_wait(self, conn: Any) -> None:
        """conn waits for nothing any more (cancelled, or gone)."""
        for key in conn.awaited:
            waiting = self.waiters.get(key)
            if waiting is not None:
                waiting.pop(conn, None)
                if not waiting:
                    del self.waiters[key]
        conn.awaited = set()

    # -- requests ------------------------------------------------------------------------------

    def _set(self, conn: Any, buf: bytes, at: int) -> int:
        key, at = read_item(buf, at, MAX_KEY)
        value, at = read_item(buf, at, MAX_VALUE)
        self._put(key, value)
        return at

    def _compare_set(self, conn: Any, buf: bytes, at: int) -> int:
        key, at = read_item(buf, at, MAX_KEY)
        expected, at = read_item(buf, at, MAX_VALUE)
        desired, at = read_item(buf, at, MAX_VALUE)
        current = self.data.get(key)
        if current is None and expected:
            self.send(conn, item(expected))  # torch's answer for a missing key
        elif current is None or current == expected:
            self._put(key, desired)
            self.send(conn, item(desired))
        else:
            self.send(conn, item(current))
        return at

    def _get(self, conn: Any, buf: bytes, at: int) -> int:
        key, at = read_item(buf, at, MAX_KEY)
        self.send(conn, item(self.data.get(key, b"")))  # missing: empty, as torch's server
        return at

    def _add(self, conn: Any, buf: bytes, at: int) -> int:
        key, at = read_item(buf, at, MAX_KEY)
        delta = read_i64(buf, at)
        total = added(counter(self.data.get(key)), delta)
        self._put(key, b"%d" % total)
        self.send(conn, I64.pack(total))
        return at + 8

    def _check(self, conn: Any, buf: bytes, at: int) -> int:
        keys, at = read_keys(buf, at)
        self.send(conn, READY if all(self._present(k) for k in keys) else NOT_READY)
        return at

    def _wait(self, conn: Any, buf: bytes, at: int) -> int:
        keys, at = read_keys(buf, at)
        missing = [k for k in keys if not self._present(k)]
        if missing:
            self._await(conn, missing)
        else:
            self.send(conn, STOP_WAITING)
        return at

    def _num_keys(self, conn: Any, buf: bytes, at: int) -> int:
        self.send(conn, I64.pack(len(self.data)))
        return at

    def _delete(self, conn: Any, buf: bytes, at: int) -> int:
        key, at = read_item(buf, at, MAX_KEY)
        old = self.data.pop(key, None)
        if old is not None:
            self.held -= len(key) + len(old) + KEY_OVERHEAD
        self.send(conn, I64.pack(old is not None))
        return at

    def _append(self, conn: Any, buf: bytes, at: int) -> int:
        key, at = read_item(buf, at, MAX_KEY)
        value, at = read_item(buf, at, MAX_VALUE)
        self._put(key, self.data.get(key, b"") + value)
        return at

    def _multi_get(self, conn: Any, buf: bytes, at: int) -> int:
        keys, at = read_keys(buf, at)
        values = [self.data.get(k, b"") for k in keys]
        if sum(map(len, values)) + 8 * len(values) > self.limits.reply:
            raise Bad(f"a MULTI_GET reply over {self.limits.reply} bytes")
        self.send(conn, b"".join(map(item, values)))
        return at

    def _multi_set(self, conn: Any, buf: bytes, at: int) -> int:
        pairs = []
        at += 8
        for _ in range(read_count(buf, at - 8)):
            key, at = read_item(buf, at, MAX_KEY)
            value, at = read_item(buf, at, MAX_VALUE)
            pairs.append((key, value))
        if sum(len(k) + len(v) + KEY_OVERHEAD for k, v in pairs) > self.limits.held - self.held:
            raise Bad(f"the store is full ({self.limits.held} bytes)")  # before any of it is set
        for key, value in pairs:
            self._put(key, value)
        return at

    def _cancel_wait(self, conn: Any, buf: bytes, at: int) -> int:
        self.forget_wait(conn)
        self.send(conn, WAIT_CANCELED)
        return at

    def _ping(self, conn: Any, buf: bytes, at: int) -> int:
        if at + 4 > len(buf):
            raise Incomplete(at + 4)
        self.send(conn, buf[at : at + 4])  # the nonce, echoed
        return at + 4

    def _queue_push(self, conn: Any, buf: bytes, at: int) -> int:
        key, at = read_item(buf, at, MAX_KEY)
        value, at = read_item(buf, at, MAX_VALUE)
        queue = self.queues.get(key)
        self._charge(len(value) + 8 + (0 if queue is not None else len(key) + KEY_OVERHEAD))
        if queue is None:
            queue = self.queues[key] = collections.deque()
        queue.append(value)
        if key in self.waiters:
            self._wake(key, one=True)  # one item: one popper (torch's wakeupOneWaitingClient)
        return at

    def _queue_pop(self, conn: Any, buf: bytes, at: int) -> int:
        key, at = read_item(buf, at, MAX_KEY)
        queue = self.queues.get(key)
        if not queue:
            self.send(conn, I64.pack(0))
            return at
        size = len(queue)
        value = queue.popleft()
        self.held -= len(value) + 8
        self.send(conn, I64.pack(size) + item(value))  # the length before the pop, as torch
        return at

    def _queue_len(self, conn: Any, buf: bytes, at: int) -> int:
        key, at = read_item(buf, at, MAX_KEY)
        self.send(conn, I64.pack(len(self.queues.get(key, ()))))
        return at

    def _list_keys(self, conn: Any, buf: bytes, at: int) -> int:
        keys = list(self.data)
        if sum(map(len, keys)) + 8 * len(keys) > self.limits.reply:
            raise Bad(f"a LIST_KEYS reply over {self.limits.reply} bytes")
        self.send(conn, U64.pack(len(keys)) + b"".join(map(item, keys)))
        return at

    def _barrier(self, conn: Any, buf: bytes, at: int) -> int:
        key, at = read_item(buf, at, MAX_KEY)
        world = read_i64(buf, at)
        if conn.awaited:
            raise Bad("a BARRIER while a WAIT is pending")
        count = added(counter(self.data.get(key)), 1)
        self._put(key, b"%d" % count, wake=False)  # counting wakes no one (torch's barrier)
        if count >= world:
            if key in self.waiters:
                self._wake(key)
            self.send(conn, STOP_WAITING)
        else:
            self._await(conn, [key])
        return at + 8
