"""Fuzzing the agent's c10d store over real sockets (issue 23, item 1).

* Garbage and near-miss requests (boundary lengths, counts, deltas, truncations) on fresh
  connections: the server never stops, and a canary connection opened first keeps getting
  right answers after every example.
* Well-formed request sequences sent to ours and to torch's own libuv server (the one
  torchrun's agent hosts) on one long-lived connection each: every reply is byte-identical.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fixtures.store.client import (
    ADD,
    APPEND,
    BARRIER,
    CANCEL_WAIT,
    CHECK,
    COMPARE_SET,
    DELETE_KEY,
    GET,
    GETNUMKEYS,
    I64,
    LIST_KEYS,
    MULTI_GET,
    MULTI_SET,
    PING,
    QUEUE_LEN,
    QUEUE_POP,
    QUEUE_PUSH,
    SET,
    U32,
    U64,
    WAIT,
    Raw,
    StoreProcess,
    item,
    items,
)
from tests.fuzz.fuzz_strategies import examples

I64_MAX, I64_MIN = (1 << 63) - 1, -(1 << 63)
LENGTHS = [0, 1, 7, 8 * 1024, 8 * 1024 + 1, 8 << 20, (8 << 20) + 1, 1 << 31, 1 << 63, (1 << 64) - 1]
COUNTS = [0, 1, 2, 128 * 1024, 128 * 1024 + 1, 1 << 40, (1 << 64) - 1]
DELTAS = [0, 1, -1, 2, I64_MAX, I64_MIN, I64_MAX - 1, I64_MIN + 1]


@pytest.fixture(scope="module")
def ours() -> Iterator[StoreProcess]:
    s = StoreProcess("--request", str(4 << 20), "--held", str(16 << 20))
    try:
        yield s
    finally:
        s.close()


class Canary:
    """A connection opened before the fuzzing, with a counter only it moves."""

    def __init__(self, store: StoreProcess) -> None:
        self.store = store
        self.conn = Raw(store.port)
        self.count = 0

    def check(self) -> None:
        assert self.store.alive(), self.store.close()
        self.count += 1
        assert self.conn.add(b"\xffcanary", 1) == self.count, "the canary lost its connection"
        fresh = Raw(self.store.port)
        assert fresh.ping(), "a new client is not answered"
        fresh.close()


@pytest.fixture(scope="module")
def canary(ours: StoreProcess) -> Canary:
    return Canary(ours)


def _u64(n: int) -> bytes:
    return U64.pack(n % (1 << 64))


piece = st.one_of(
    st.binary(max_size=24),
    st.sampled_from(LENGTHS).map(_u64),
    st.sampled_from(COUNTS).map(_u64),
    st.sampled_from(DELTAS).map(I64.pack),
    st.sampled_from([b"k", b"init/", b""]).map(item),  # not the canary's key: its count is exact
)
near_miss = st.tuples(st.integers(0, 255), st.lists(piece, max_size=6)).map(
    lambda t: bytes([t[0]]) + b"".join(t[1])
)


def _deliver(store: StoreProcess, data: bytes, hello: bool) -> None:
    c = Raw(store.port, hello=hello)
    c.send(data)
    c.close()  # mid-request, mid-WAIT or after: the server must forget it cleanly


@examples(300)
@given(data=st.binary(max_size=2048), hello=st.booleans())
def test_garbage_never_stops_the_store(
    ours: StoreProcess, canary: Canary, data: bytes, hello: bool
) -> None:
    _deliver(ours, data, hello)
    canary.check()


@examples(400)
@given(requests=st.lists(near_miss, min_size=1, max_size=5), cut=st.integers(0, 64))
def test_near_miss_requests_never_stop_the_store(
    ours: StoreProcess, canary: Canary, requests: list[bytes], cut: int
) -> None:
    data = b"".join(requests)
    _deliver(ours, data[: len(data) - cut] if cut < len(data) else data, hello=True)
    canary.check()


# -- differential: ours against torch's libuv server -----------------------------------------

VALUES = [b"k0", b"k1", b"k2"]  # SET / APPEND / COMPARE_SET
COUNTERS = [b"c0", b"c1"]  # ADD only (torch closes the connection on ADD to a non-number)
QUEUES = [b"q0", b"q1"]
blob = st.binary(max_size=40)

op = st.one_of(
    st.tuples(st.just(SET), st.sampled_from(VALUES), blob),
    st.tuples(st.just(APPEND), st.sampled_from(VALUES), blob),
    st.tuples(st.just(COMPARE_SET), st.sampled_from(VALUES), blob, blob),
    st.tuples(st.just(GET), st.sampled_from(VALUES + COUNTERS + [b"none"])),
    st.tuples(st.just(ADD), st.sampled_from(COUNTERS), st.integers(-(10**6), 10**6)),
    st.tuples(st.just(CHECK), st.lists(st.sampled_from(VALUES + COUNTERS + QUEUES), max_size=3)),
    st.tuples(st.just(WAIT), st.lists(st.sampled_from(VALUES + COUNTERS), max_size=3)),
    st.tuples(st.just(GETNUMKEYS)),
    st.tuples(st.just(DELETE_KEY), st.sampled_from(VALUES + COUNTERS + [b"none"])),
    st.tuples(st.just(MULTI_GET), st.lists(st.sampled_from(VALUES + COUNTERS), max_size=4)),
    st.tuples(st.just(MULTI_SET), st.lists(st.tuples(st.sampled_from(VALUES), blob), max_size=3)),
    st.tuples(st.just(PING), st.integers(0, (1 << 32) - 1)),
    st.tuples(st.just(QUEUE_PUSH), st.sampled_from(QUEUES), blob),
    st.tuples(st.just(QUEUE_POP), st.sampled_from(QUEUES)),
    st.tuples(st.just(QUEUE_LEN), st.sampled_from(QUEUES)),
    st.tuples(st.just(LIST_KEYS)),
    st.tuples(st.just(BARRIER), st.sampled_from(COUNTERS), st.integers(-2, 3)),
)


class Session:
    """One long-lived connection to one server; requests are namespaced per example."""

    def __init__(self, store: StoreProcess) -> None:
        self.conn = Raw(store.port)

    def exact(self, n: int) -> bytes:
        got = self.conn.read(n, timeout=30)
        assert len(got) == n, f"the server closed or stalled ({len(got)} of {n} bytes)"
        return got

    def value(self) -> bytes:
        return self.exact(int(U64.unpack(self.exact(8))[0]))

    def run(self, ns: bytes, ops: list[tuple[Any, ...]]) -> list[Any]:
        """Send each request, read its reply; what a comparison can use."""
        out: list[Any] = []
        base = self.num_keys()
        for o in ops:
            q, args = o[0], o[1:]

            def k(key: bytes) -> bytes:
                return ns + key

            if q in (SET, APPEND, QUEUE_PUSH):
                self.conn.send(bytes([q]) + item(k(args[0])) + item(args[1]))
                out.append(None)
            elif q == COMPARE_SET:
                self.conn.send(bytes([q]) + item(k(args[0])) + item(args[1]) + item(args[2]))
                out.append(self.value())
            elif q == GET:
                self.conn.send(bytes([q]) + item(k(args[0])))
                out.append(self.value())
            elif q == ADD:
                self.conn.send(bytes([q]) + item(k(args[0])) + I64.pack(args[1]))
                out.append(self.exact(8))
            elif q == CHECK:
                self.conn.send(bytes([q]) + items([k(x) for x in args[0]]))
                out.append(self.exact(1))
            elif q == WAIT:  # a WAIT that may block, then its cancel: both servers answer alike
                self.conn.send(bytes([q]) + items([k(x) for x in args[0]]) + bytes([CANCEL_WAIT]))
                first = self.exact(1)
                out.append(first + (self.exact(1) if first == b"\x00" else b""))
            elif q == GETNUMKEYS:
                out.append(self.num_keys() - base)
            elif q in (DELETE_KEY, QUEUE_LEN):
                self.conn.send(bytes([q]) + item(k(args[0])))
                out.append(self.exact(8))
            elif q == MULTI_GET:
                self.conn.send(bytes([q]) + items([k(x) for x in args[0]]))
                out.append([self.value() for _ in args[0]])
            elif q == MULTI_SET:
                pairs = b"".join(item(k(key)) + item(v) for key, v in args[0])
                self.conn.send(bytes([q]) + U64.pack(len(args[0])) + pairs)
                out.append(None)
            elif q == PING:
                self.conn.send(bytes([q]) + U32.pack(args[0]))
                out.append(self.exact(4))
            elif q == QUEUE_POP:
                self.conn.send(bytes([q]) + item(k(args[0])))
                size = self.exact(8)
                out.append((size, self.value() if I64.unpack(size)[0] else None))
            elif q == LIST_KEYS:
                self.conn.send(bytes([q]))
                keys = [self.value() for _ in range(int(U64.unpack(self.exact(8))[0]))]
                out.append(sorted(x for x in keys if x.startswith(ns)))
            elif q == BARRIER:  # it may block: then its cancel, as a torch client's timeout
                self.conn.send(
                    bytes([q]) + item(k(args[0])) + I64.pack(args[1]) + bytes([CANCEL_WAIT])
                )
                first = self.exact(1)
                out.append(first + (self.exact(1) if first == b"\x00" else b""))
        return out

    def num_keys(self) -> int:
        self.conn.send(bytes([GETNUMKEYS]))
        return int(I64.unpack(self.exact(8))[0])


@pytest.fixture(scope="module")
def pair(ours: StoreProcess) -> Iterator[tuple[Session, Session]]:
    pytest.importorskip("torch")
    theirs = StoreProcess(torch=True)
    try:
        yield Session(ours), Session(theirs)
    finally:
        theirs.close()


_names = itertools.count()


@examples(250)
@given(ops=st.lists(op, min_size=1, max_size=25))
def test_replies_match_torchs_server(
    pair: tuple[Session, Session], ops: list[tuple[Any, ...]]
) -> None:
    ns = b"e%d/" % next(_names)
    mine, torchs = pair
    assert mine.run(ns, ops) == torchs.run(ns, ops)
