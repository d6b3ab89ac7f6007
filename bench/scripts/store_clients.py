"""Many c10d TCPStore clients in one process, speaking the wire protocol (bench/c10d_scale.py).

``python store_clients.py PORT WORLD FIRST COUNT``: connections FIRST..FIRST+COUNT-1 of a
WORLD-client job. Each connection does what a rank does between torch's ``TCPStore(...)``
client and the end of ``init_process_group`` with ``TORCH_DIST_INIT_BARRIER=1``:

1. VALIDATE + PING (the client handshake), ADD ``init/`` 1 (``TCPStore(world_size=...)``);
2. SET its address ``/worker/attempt_0/rank_R`` (what gloo's rendezvous publishes), then ADD
   1 to the barrier key (``_store_based_barrier``); the client that brings it to WORLD sets
   the ``last_worker`` key; everyone WAITs for that key: the barrier;
3. GET a peer's address (torch's ``get`` is WAIT then GET), as the process group does next.

Every connection is its own state machine on one epoll loop, strictly one request in flight
(as a torch client, which blocks on each reply). The process prints "ready" once imported,
reads a line (the go signal) and prints one JSON line: when it started (CLOCK_MONOTONIC, the
same clock in every process), when its last connection was established, when its last one passed the barrier and when the last
one finished, the operations it made, and the connections that failed (with why).
"""

from __future__ import annotations

import errno
import json
import resource
import selectors
import socket
import struct
import sys
import time

MAGIC = 0x3C85F7CE
VALIDATE, SET, GET, ADD, WAIT, PING = 0, 1, 3, 4, 6, 13
_U32, _U64, _I64 = struct.Struct("<I"), struct.Struct("<Q"), struct.Struct("<q")
PREFIX = b"/worker/attempt_0/"
BARRIER = PREFIX + b"store_based_barrier_key:1"
LAST = BARRIER + b":last_worker"
CONNECT_RETRY_S = 0.05


def item(b: bytes) -> bytes:
    """A string or value on the wire: u64 length + bytes."""
    return _U64.pack(len(b)) + b


def add(key: bytes, delta: int) -> bytes:
    """An ADD request."""
    return bytes([ADD]) + item(key) + _I64.pack(delta)


def wait(key: bytes) -> bytes:
    """A WAIT request for one key."""
    return bytes([WAIT]) + _U64.pack(1) + item(key)


HELLO = bytes([VALIDATE]) + _U32.pack(MAGIC) + bytes([PING]) + _U32.pack(7)
INIT = add(b"init/", 1)
WAIT_LAST = wait(LAST)


class Client:
    """One rank's connection and where it is in the sequence."""

    __slots__ = ("rank", "sock", "step", "buf", "need")

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.sock: socket.socket | None = None
        self.step = 0
        self.buf = b""
        self.need = 0  # bytes of reply the current request has


def _peer(rank: int, world: int) -> bytes:
    return PREFIX + b"rank_%d" % ((rank + 1) % world)


def main() -> int:
    """Run COUNT clients to the end; print the JSON line."""
    port, world, first, count = (int(a) for a in sys.argv[1:5])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = count + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, soft), max(want, hard)))
    sel = selectors.EpollSelector()
    clients = [Client(first + i) for i in range(count)]
    ops = 0
    failed: dict[str, int] = {}
    print("ready", flush=True)
    sys.stdin.readline()
    t0 = time.monotonic()
    barrier_at = done_at = connected_at = t0
    pending = list(clients)  # not yet connected
    live = 0
    retry_at = 0.0
    finished: list[socket.socket] = []

    def connect(c: Client) -> bool:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rc = s.connect_ex(("127.0.0.1", port))
        if rc not in (0, errno.EINPROGRESS):
            s.close()
            return False
        c.sock, c.step = s, 0
        sel.register(s, selectors.EVENT_WRITE, c)
        return True

    def send(c: Client, data: bytes, need: int) -> None:
        assert c.sock is not None
        c.sock.sendall(data)  # small requests: the socket buffer takes them whole
        c.need = need

    def fail(c: Client, why: str) -> None:
        nonlocal live
        failed[why] = failed.get(why, 0) + 1
        if c.sock is not None:
            sel.unregister(c.sock)
            c.sock.close()
            c.sock = None
        live -= 1

    while pending or live:
        now = time.monotonic()
        if pending and now >= retry_at:
            still = []
            for c in pending:
                if connect(c):
                    live += 1
                else:
                    still.append(c)
            pending = still
            retry_at = now + CONNECT_RETRY_S
        events = sel.select(CONNECT_RETRY_S if pending else 30.0)
        if not events and not pending:
            for key in list(sel.get_map().values()):
                fail(key.data, "timeout")
            break
        for key, _ in events:
            c: Client = key.data
            sock = c.sock
            assert sock is not None
            if c.step == 0:  # connected (or refused)
                err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    sel.unregister(sock)
                    sock.close()
                    c.sock = None
                    live -= 1
                    pending.append(c)  # the server is not listening yet or is full: retry
                    continue
                sel.modify(sock, selectors.EVENT_READ, c)
                connected_at = time.monotonic()
                send(c, HELLO, 4)
                ops += 2
                c.step = 1
                continue
            try:
                data = sock.recv(65536)
            except OSError as e:
                fail(c, f"recv: {e.strerror}")
                continue
            if not data:
                fail(c, f"closed by the server at step {c.step}")
                continue
            c.buf += data
            while c.sock is not None and c.need and len(c.buf) >= c.need:
                reply, c.buf = c.buf[: c.need], c.buf[c.need :]
                c.need = 0
                step = c.step
                c.step += 1
                if step == 1:  # pong
                    send(c, INIT, 8)
                    ops += 1
                elif step == 2:  # init/ counted
                    addr = item(PREFIX + b"rank_%d" % c.rank) + item(b"127.0.0.1:%d" % c.rank)
                    send(c, bytes([SET]) + addr + add(BARRIER, 1), 8)
                    ops += 2
                elif step == 3:  # the barrier count: the last to arrive opens the barrier
                    req = WAIT_LAST
                    if _I64.unpack(reply)[0] == world:
                        req = bytes([SET]) + item(LAST) + item(b"1") + WAIT_LAST
                        ops += 1
                    send(c, req, 1)
                    ops += 1
                elif step == 4:  # through the barrier: fetch a peer's address (WAIT, GET)
                    barrier_at = time.monotonic()
                    send(c, wait(_peer(c.rank, world)), 1)
                    ops += 1
                elif step == 5:
                    send(c, bytes([GET]) + item(_peer(c.rank, world)), 8)
                    ops += 1
                elif step == 6:  # the value's length
                    c.need = _U64.unpack(reply)[0] or 0
                    if not c.need:
                        c.step += 1
                if c.step == 7:  # done; the connection stays open, as a rank's does
                    done_at = time.monotonic()
                    sel.unregister(sock)
                    finished.append(sock)
                    live -= 1
                    break
    for sock in finished:
        sock.close()
    print(
        json.dumps(
            {
                "t0": t0,
                "connected": connected_at,
                "barrier": barrier_at,
                "done": done_at,
                "ops": ops,
                "failed": failed,
                "count": count,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
