"""The agent's torch-free TCPStore server against real torch 2.13 TCPStore clients.

The server runs in its own process (tests/fixtures/store/serve.py: torch's client holds the
GIL while it blocks, so an in-process server would deadlock); the clients are torch's own.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.rank.conftest import child_env

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

SERVE = Path(__file__).resolve().parents[1] / "fixtures" / "store" / "serve.py"
TIMEOUT = timedelta(seconds=20)


class Server:
    """The agent's store server in a child process."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def command(self, line: str) -> str:
        """Send a line to the server (reset, clients); the clients answer is read back."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip() if line == "clients" else ""

    def client(self, host: str = "127.0.0.1", world_size: int | None = None) -> object:
        """A torch TCPStore client, exactly as a rank's env:// makes it with the agent store."""
        return dist.TCPStore(host, self.port, world_size, False, TIMEOUT)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


def test_every_store_call_a_rank_can_make(server: Server) -> None:
    a, b = server.client(world_size=2), server.client("localhost", world_size=2)
    a.set("k", b"v")
    assert b.get("k") == b"v"
    assert a.add("n", 5) == 5 and b.add("n", -2) == 3 and a.get("n") == b"3"
    assert a.compare_set("k", b"v", b"w") == b"w"  # matched: swapped
    assert a.compare_set("k", b"nope", b"x") == b"w"  # no match: the current value
    assert a.compare_set("fresh", b"", b"x") == b"x"  # missing + empty expected: created
    assert a.compare_set("missing", b"e", b"x") == b"e"  # torch's answer for a missing key
    assert a.check(["k", "n"]) and not a.check(["k", "absent"])
    # set-like calls have no reply: read back on the same connection (requests are ordered)
    a.multi_set(["m1", "m2"], [b"1", b"2"])
    assert a.multi_get(["m1", "m2", "k"]) == [b"1", b"2", b"w"]
    a.append("m1", b"+")
    assert a.get("m1") == b"1+"
    keys = a.num_keys()  # init/ (both clients joined) + k, n, fresh, m1, m2
    assert keys == 6
    assert a.delete_key("m2") and not a.delete_key("m2")
    assert sorted(b.list_keys()) == ["fresh", "k", "m1", "n"]
    a.queue_push("q", b"job")
    assert a.queue_len("q") == 1
    assert b.queue_pop("q") == b"job" and b.queue_len("q") == 0  # pop waits for the key
    b.wait(["k", "n"])  # present: returns at once
    with pytest.raises(dist.DistStoreError, match="wait timeout"):
        a.wait(["never"], timedelta(milliseconds=200))
    assert a.get("k") == b"w"  # the connection is still usable after a cancelled wait
    assert server.command("clients") == "2"


def test_get_blocks_until_another_client_sets_the_key(server: Server) -> None:
    a, b = server.client(), server.client()
    setter = threading.Timer(0.2, lambda: b.set("late", b"here"))
    setter.start()
    try:
        assert a.get("late") == b"here"  # torch's get = wait + get
    finally:
        setter.join()


def test_barrier(server: Server) -> None:
    """Store.barrier (torch 2.13's BARRIER query) releases every caller at world_size, times
    out (and cancels) otherwise."""
    a, b = server.client(), server.client()
    a.barrier("alone", 1)
    other = threading.Thread(target=lambda: b.barrier("pair", 2))
    other.start()
    try:
        a.barrier("pair", 2)
    finally:
        other.join(20)
    assert not other.is_alive()
    with pytest.raises(dist.DistStoreError, match="barrier timeout"):
        a.barrier("never", 2, timedelta(milliseconds=200))
    assert a.add("after", 1) == 1  # the cancelled barrier left the connection usable
    assert a.get("pair") == b"2"  # the count, as torch's server keeps it


def test_reset_forgets_every_key_and_client(server: Server) -> None:
    a = server.client()
    a.set("old", b"1")
    server.command("reset")
    assert server.command("clients") == "0"
    fresh = server.client()
    assert not fresh.check(["old"])


def test_a_non_torch_client_is_disconnected(server: Server) -> None:
    import socket

    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        s.settimeout(10)
        assert s.recv(10) == b""  # closed, as torch's server closes an unvalidated client
    assert server.client().add("still", 1) == 1


GLOO = """
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
dist.barrier()
assert t.item() == 3.0, t
store = dist.distributed_c10d._get_default_store()
store.set(f"done{dist.get_rank()}", b"1")
store.wait([f"done{1 - dist.get_rank()}"])
dist.destroy_process_group()
print("ok", t.item())
"""


def test_gloo_all_reduce_over_the_agent_store(server: Server) -> None:
    """init_process_group(env://) with TORCHELASTIC_USE_AGENT_STORE=True, as ranks get it."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", GLOO],
            env=child_env(
                RANK=str(r),
                LOCAL_RANK=str(r),
                WORLD_SIZE="2",
                MASTER_ADDR="localhost",
                MASTER_PORT=str(server.port),
                TORCHELASTIC_USE_AGENT_STORE="True",
                TORCHELASTIC_RESTART_COUNT="0",
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in (0, 1)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert "ok 3.0" in out
