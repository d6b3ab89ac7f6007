"""The agent's c10d store against broken and hostile clients (issue 23, item 1).

A real server (tests/fixtures/store/serve.py) on real sockets: whatever a client sends, the
server closes that client's connection at most, and every other client keeps its answers.
Another local user's connection is refused (root only: the test runs a client as uid 65534).
"""

from __future__ import annotations

import os
import resource
import socket
import sys
import time
from collections.abc import Iterator

import pytest

from tests.fixtures.store.client import (
    ADD,
    CHECK,
    HELLO,
    I64,
    LIST_KEYS,
    MULTI_GET,
    MULTI_SET,
    SET,
    U64,
    WAIT,
    Raw,
    StoreProcess,
    item,
    items,
    non_loopback_address,
    peek_as,
    python_for,
    req_add,
    req_set,
)

I64_MAX, I64_MIN = (1 << 63) - 1, -(1 << 63)
OTHER_UID = 65534  # nobody


@pytest.fixture
def store() -> Iterator[StoreProcess]:
    s = StoreProcess()
    try:
        yield s
    finally:
        s.close()


def still_serves(store: StoreProcess, *bystanders: Raw) -> None:
    """The server runs, answers a new client, and every bystander's connection still works."""
    assert store.alive(), store.close()
    fresh = Raw(store.port)
    assert fresh.ping(), "a new client gets no answer"
    for i, b in enumerate(bystanders):
        assert b.ping(1000 + i), "a bystander lost its connection"
    fresh.close()


def test_two_adds_of_int64_max_close_the_client_not_the_store(store: StoreProcess) -> None:
    """The issue's case: ADD k 2**63-1 twice crashed the server (struct.error)."""
    bystander = Raw(store.port)
    hostile = Raw(store.port)
    assert hostile.add(b"k", I64_MAX) == I64_MAX
    assert hostile.add(b"k", I64_MAX) is None, "an overflowing ADD was answered"
    assert hostile.closed()
    still_serves(store, bystander)
    assert bystander.add(b"k", 0) == I64_MAX, "the counter changed"
    assert bystander.add(b"k", I64_MIN) == -1  # in range: still an ordinary counter


@pytest.mark.parametrize(
    ("value", "delta"),
    [
        (b"-9223372036854775808", -1),  # below int64
        (b"99999999999999999999", 1),  # a number stoll cannot read (out of range)
        (b"9223372036854775808", 0),
        (b"not a number", 1),
        (b"1" * 5000, 1),  # Python's int() refuses 4,300+ digits: no traceback either
    ],
)
def test_add_that_torch_cannot_represent_closes_the_client(
    store: StoreProcess, value: bytes, delta: int
) -> None:
    bystander = Raw(store.port)
    hostile = Raw(store.port)
    hostile.send(req_set(b"n", value))
    assert hostile.add(b"n", delta) is None
    assert hostile.closed()
    still_serves(store, bystander)
    assert bystander.get(b"n") == value  # left as it was


def test_add_reads_counters_as_stoll(store: StoreProcess) -> None:
    """What torch's std::stoll accepts is a counter: spaces, a sign, leading zeros, a tail."""
    c = Raw(store.port)
    for value, expected in ((b"  +007", 8), (b"-5abc", -4), (b"\t12 ", 13)):
        c.send(req_set(b"s", value))
        assert c.add(b"s", 1) == expected, value
    assert c.get(b"s") == b"13"


HUGE = U64.pack(1 << 62)
HOSTILE = {
    "unknown query": bytes([200]),
    "query past the last": bytes([19]) + b"\0" * 16,
    "no VALIDATE first": None,  # a SET before the handshake (sent without HELLO)
    "wrong magic": b"",  # a VALIDATE with the wrong number (sent without HELLO)
    "a second VALIDATE": HELLO,
    "key length 2**62": bytes([SET]) + HUGE,
    "key of 8 KiB + 1": bytes([SET]) + item(b"k" * (8 * 1024 + 1)) + item(b"v"),
    "value length 2**62": bytes([SET]) + item(b"k") + HUGE,
    "value of 8 MiB + 1": bytes([SET]) + item(b"k") + U64.pack(8 * 1024 * 1024 + 1),
    "CHECK of 2**62 keys": bytes([CHECK]) + HUGE,
    "WAIT of 128 Ki + 1 keys": bytes([WAIT]) + U64.pack(128 * 1024 + 1),
    "MULTI_GET of 2**62 keys": bytes([MULTI_GET]) + HUGE,
    "MULTI_SET of 2**62 pairs": bytes([MULTI_SET]) + HUGE,
    "a second WAIT while waiting": bytes([WAIT]) + items([b"never"]) * 2,
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_request_closes_only_its_connection(store: StoreProcess, case: str) -> None:
    waiter = Raw(store.port)  # a rank blocked in a WAIT when the hostile client arrives
    waiter.send(bytes([WAIT]) + items([b"go"]))
    bystander = Raw(store.port)
    bystander.send(req_set(b"kept", b"yes"))
    if case == "no VALIDATE first":
        hostile = Raw(store.port, hello=False)
        hostile.send(req_set(b"kept", b"overwritten"))
    elif case == "wrong magic":
        hostile = Raw(store.port, hello=False)
        hostile.send(b"\x00" + (0x12345678).to_bytes(4, "little") + req_set(b"kept", b"no"))
    else:
        hostile = Raw(store.port)
        hostile.send(HOSTILE[case])
    assert hostile.closed(), f"{case}: the connection stayed open"
    still_serves(store, bystander)
    assert bystander.get(b"kept") == b"yes"
    bystander.send(req_set(b"go", b"1"))
    assert waiter.read(1) == b"\x00", "the waiting rank was not released"


def test_the_store_is_bounded() -> None:
    """A client filling the store past its bound loses its connection; what is held stays."""
    store = StoreProcess("--held", str(1 << 20))
    try:
        bystander = Raw(store.port)
        hostile = Raw(store.port)
        chunk = b"x" * (256 * 1024)
        for i in range(8):  # 2 MiB in all: the fourth value crosses 1 MiB
            hostile.send(req_set(b"blob%d" % i, chunk))
        assert hostile.closed()
        stats = store.stats()
        assert stats["held"] <= 1 << 20, stats
        still_serves(store, bystander)
        assert bystander.get(b"blob0") == chunk  # what was stored before the bound is kept
    finally:
        store.close()


def test_a_client_that_never_reads_its_replies_is_dropped() -> None:
    store = StoreProcess("--reply", str(1 << 20))
    try:
        bystander = Raw(store.port)
        bystander.send(req_set(b"k" * 100, b"v" * 1000))
        hostile = Raw(store.port)
        hostile.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        flood = bytes([LIST_KEYS]) * 200000  # 23 MB of replies, none of them read
        hostile.send(flood)
        stats = store.wait_stats("dropped", 1)
        assert stats["dropped"] == 1, stats
        still_serves(store, bystander)
    finally:
        store.close()


def test_a_request_larger_than_the_bound_is_refused_before_it_is_all_buffered() -> None:
    store = StoreProcess("--request", str(1 << 20))
    try:
        hostile = Raw(store.port)
        keys = [b"k%d" % i for i in range(100000)]  # 1.3 MB of one CHECK, in pieces
        hostile.send(bytes([CHECK]) + items(keys))
        assert hostile.closed()
        still_serves(store)
    finally:
        store.close()


def test_a_wait_of_many_keys_then_hanging_up_leaves_nothing_behind(store: StoreProcess) -> None:
    for _ in range(3):
        c = Raw(store.port)
        c.send(bytes([WAIT]) + items([b"w%d" % i for i in range(20000)]))
        c.close()
    assert store.wait_stats("clients", 0)["clients"] == 0
    waker = Raw(store.port)
    for i in range(0, 20000, 997):
        waker.send(req_set(b"w%d" % i, b"1"))  # wakes no one: the waiters are gone
    still_serves(store, waker)


def test_a_loopback_store_is_not_reachable_from_other_hosts() -> None:
    addr = non_loopback_address()
    if addr is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    store = StoreProcess("--loopback")
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((addr, store.port), timeout=5).close()
        assert Raw(store.port).ping()
        if socket.has_ipv6:
            try:
                v6 = Raw(store.port, host="::1")
            except OSError:
                pass  # no IPv6 loopback on this machine
            else:
                assert v6.ping()
    finally:
        store.close()


# -- another local user ------------------------------------------------------------------------


def _as_other_user(host: str, port: int) -> int:
    """Reply bytes a client of uid 65534 gets from the store at host:port."""
    python = python_for(OTHER_UID)
    if python is None:
        pytest.skip(f"no python that uid {OTHER_UID} may run")
    return peek_as(OTHER_UID, host, port, python)


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not sys.platform.startswith("linux"),
    reason="a second local user needs root (and Linux's socket tables)",
)


@needs_root
@pytest.mark.parametrize("loopback", [True, False], ids=["loopback", "every-interface"])
def test_another_users_connection_is_refused(loopback: bool) -> None:
    store = StoreProcess(*(["--loopback"] if loopback else []))
    try:
        mine = Raw(store.port)
        mine.send(req_set(b"secret", b"s3cr3t") + req_add(b"n", 1))
        assert mine.read(8) == I64.pack(1)
        hosts = ["127.0.0.1"]
        if not loopback and (addr := non_loopback_address()):
            hosts.append(addr)  # through the interface other hosts use: still this host
        for host in hosts:
            assert _as_other_user(host, store.port) == 0, f"uid {OTHER_UID} got replies ({host})"
        stats = store.stats()
        assert stats["refused"] == len(hosts), stats
        still_serves(store, mine)
        assert mine.get(b"secret") == b"s3cr3t"
    finally:
        err = store.close()
    assert f"refused a c10d store connection from uid {OTHER_UID}" in err, err
    assert err.count("refused a c10d store connection") == 1, err  # once per user, not per try


def test_bystanders_are_served_while_a_client_sends_its_request_byte_by_byte(
    store: StoreProcess,
) -> None:
    slow = Raw(store.port)
    bystander = Raw(store.port)
    request = bytes([ADD]) + item(b"slow") + I64.pack(5)
    for b in request[:-1]:
        slow.send(bytes([b]))
        assert bystander.ping()
    slow.send(request[-1:])
    assert slow.read(8) == I64.pack(5)


@pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="needs prlimit (Linux)")
def test_clients_past_the_descriptor_limit_are_turned_away_not_left_hanging() -> None:
    """At the fd limit, a pending client is accepted and closed (torch retries its connect):
    none waits unanswered in the backlog while the server spins on a readable listener."""
    store = StoreProcess()
    try:
        resource.prlimit(store.proc.pid, resource.RLIMIT_NOFILE, (40, 40))
        clients = [Raw(store.port) for _ in range(60)]
        for c in clients:
            c.send(req_add(b"n", 1))
        deadline = time.monotonic() + 20
        answered = closed = 0
        for c in clients:
            got = c.read(8, timeout=max(deadline - time.monotonic(), 0.01))
            answered += len(got) == 8
            closed += got == b"" and c.closed(timeout=0.01)
        assert answered + closed == len(clients), (answered, closed)
        assert answered >= 20 and closed >= 1, (answered, closed)
        for c in clients:
            c.close()
        assert store.wait_stats("clients", 0)["clients"] == 0
        still_serves(store)
    finally:
        store.close()
