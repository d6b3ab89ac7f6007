"""The preflight's torch-free store client, against the agent's own server (in this loop, as
node 0's agent uses it) and against a real torch 2.13 TCPStore server."""

from __future__ import annotations

import selectors
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from trainlaunch.agent.storeclient import Reply, StoreClient, StoreClosed
from trainlaunch.agent.tcpstore import TCPStoreServer


def run_until(sel: selectors.BaseSelector, done: Callable[[], bool], timeout: float = 10) -> None:
    """Drive one selector loop (server and clients alike) until done()."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        for key, events in sel.select(0.1):
            if isinstance(key.data, TCPStoreServer):
                key.data.on_ready(key, events)
            else:
                key.data.on_ready(events)


def test_set_get_add_wait_through_the_agents_own_server() -> None:
    sel = selectors.DefaultSelector()
    server = TCPStoreServer(sel, 0)
    a = StoreClient.connect("127.0.0.1", server.port, sel)
    b = StoreClient.connect("localhost", server.port, sel)
    run_until(sel, lambda: a.validated and b.validated)
    waited = b.wait(["k"])  # answered only once a sets it
    run_until(sel, lambda: server.clients == 2)
    assert not waited.done
    a.set("k", b"x" * 300_000)  # more than one socket buffer: written as the loop turns
    count: Reply = a.add("n", 5)
    run_until(sel, lambda: waited.done and count.done)
    got = b.get("k")
    run_until(sel, lambda: got.done)
    assert got.value == b"x" * 300_000 and count.value == 5
    a.close()
    b.close()
    server.close()


def test_a_port_held_by_something_else_is_not_a_store() -> None:
    import socket

    sel = selectors.DefaultSelector()
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        client = StoreClient.connect("127.0.0.1", other.getsockname()[1], sel)
        conn, _ = other.accept()
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")  # not the ping's echo
        with pytest.raises(StoreClosed, match="not a c10d store"):
            run_until(sel, lambda: client.validated)
        conn.close()
        client.close()


def test_against_torchs_own_server() -> None:
    dist = pytest.importorskip("torch.distributed")
    master = dist.TCPStore(
        "127.0.0.1", 0, None, True, timedelta(seconds=20), wait_for_workers=False
    )
    sel = selectors.DefaultSelector()
    client = StoreClient.connect("127.0.0.1", master.port, sel)
    # torch's clients put "/" before every key (TCPStore's keyPrefix_): ours use keys as given
    waited = client.wait(["/from-torch"])
    run_until(sel, lambda: client.validated)
    assert not waited.done
    master.set("from-torch", "yes")
    run_until(sel, lambda: waited.done)
    got = client.get("/from-torch")
    client.set("/from-us", b"hello")
    total = client.add("/n", 3)
    run_until(sel, lambda: got.done and total.done)
    assert got.value == b"yes" and total.value == 3
    assert master.get("from-us") == b"hello" and master.add("n", 1) == 4
    client.close()
