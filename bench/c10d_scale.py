"""10. The agent's c10d store with 1k, 4k and 16k clients, against torch's libuv TCPStore.

N clients, from a few client processes that speak the wire protocol (scripts/
store_clients.py: one epoll loop each, strictly one request in flight per connection, as a
torch client), do what a rank does from ``TCPStore(...)`` to the end of ``init_process_group``
with its store barrier: handshake, ADD ``init/``, SET its address, the barrier (ADD, the last
SETs, everyone WAITs), then a GET of a peer's address. Each N runs the same clients against
our server (the agent's, scripts/store_server.py ours) and torch's (``TCPStore(is_master=True,
use_libuv=True)``, what torchrun's agent hosts), interleaved. Reported per N: time to the
barrier (the last client through), ops/s over the whole run, each server's CPU time, and
clients that failed.

torch's server reverse-resolves every client's address (``getnameinfo``) on its event-loop
thread; on a machine whose resolver is slow or drops packets (this one's: 5 s timeouts) that
dominates. Where ``unshare`` works (root), both servers run with a resolver that fails at
once (a private mount of /etc/resolv.conf naming a closed local port): torch's best case.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import time
from pathlib import Path

from bench.context import SCRIPTS, Context
from bench.harness import (
    BenchError,
    Points,
    Row,
    Table,
    Target,
    compare,
    per_second,
    seconds,
    skipped,
)

NAME = "c10d"
CLIENTS = SCRIPTS / "store_clients.py"
SERVER = SCRIPTS / "store_server.py"
GOAL_N = 4000
FAST_RESOLVER = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"


def _fd_room() -> int:
    """How many descriptors a process may open here (root may raise its hard limit)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if os.geteuid() == 0 else int(hard)


def _resolver_wrap(ctx: Context) -> tuple[list[str], str]:
    """A command prefix giving a server a resolver that fails at once, and what it did."""
    if not shutil.which("unshare") or os.geteuid() != 0:
        return [], "servers use this machine's resolver (no unshare as root)"
    conf = ctx.scratch / "resolv.fast"
    conf.write_text(FAST_RESOLVER)
    prefix = [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        'mount --bind "$0" /etc/resolv.conf && exec "$@"',
        str(conf),
    ]
    probe = subprocess.run([*prefix, "cat", "/etc/resolv.conf"], capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout != FAST_RESOLVER:
        return [], "servers use this machine's resolver (unshare/mount failed)"
    return prefix, "both servers ran with a resolver that fails at once (torch's best case)"


def one_run(ctx: Context, python: Path, kind: str, n: int, procs: int, wrap: list[str]) -> dict:
    """One server, procs client processes, n clients: the clients' and the server's figures."""
    env = ctx.env()
    server = subprocess.Popen(
        [*wrap, str(python), str(SERVER), kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # torch warns once per client it cannot resolve
        text=True,
        env=env,
    )
    clients: list[subprocess.Popen[str]] = []
    try:
        assert server.stdout is not None and server.stdin is not None
        port = server.stdout.readline().strip()
        if not port.isdigit():
            raise BenchError(f"store server {kind} did not start")
        first = 0
        for i in range(procs):
            count = n // procs + (i < n % procs)
            clients.append(
                subprocess.Popen(
                    [str(python), str(CLIENTS), port, str(n), str(first), str(count)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    env=env,
                )
            )
            first += count
        for c in clients:
            assert c.stdout is not None
            if c.stdout.readline().strip() != "ready":
                raise BenchError("a client process did not start")
        for c in clients:  # go: every process starts its clients at once
            assert c.stdin is not None
            c.stdin.write("go\n")
            c.stdin.flush()
        results = []
        for c in clients:
            out, _ = c.communicate(timeout=600)
            results.append(json.loads(out.strip().splitlines()[-1]))
        server.stdin.close()
        cpu = float(server.stdout.readline().strip() or "nan")
        server.wait(timeout=60)
    finally:
        for p in [*clients, server]:
            if p.poll() is None:
                p.kill()
                p.wait()
    t0 = min(r["t0"] for r in results)
    failed: dict[str, int] = {}
    for r in results:
        for why, count in r["failed"].items():
            failed[why] = failed.get(why, 0) + count
    done = max(r["done"] for r in results) - t0
    return {
        "connected": max(r["connected"] for r in results) - t0,
        "barrier": max(r["barrier"] for r in results) - t0,
        "done": done,
        "ops_s": sum(r["ops"] for r in results) / done if done > 0 else 0.0,
        "cpu": cpu,
        "failed": sum(failed.values()),
        "why": failed,
    }


def _peer_check_us(n: int = 2000) -> float:
    """What refusing other users costs the agent per connection (a netlink lookup), in us."""
    import socket

    from trainlaunch.agent.tcpstore.peers import PeerOwners

    owners = PeerOwners()
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        with socket.create_connection(srv.getsockname()) as cli:
            here = srv.getsockname()
            t0 = time.perf_counter()
            for _ in range(n):
                owners.owner(cli.getsockname(), here)
            took = time.perf_counter() - t0
    owners.close()
    return took / n * 1e6


def _somaxconn() -> str:
    try:
        return Path("/proc/sys/net/core/somaxconn").read_text().strip()
    except OSError:
        return "?"


def _median(runs: list[dict], key: str) -> float:
    values = sorted(r[key] for r in runs)
    return float(values[len(values) // 2])


def run(ctx: Context) -> list[Table]:
    """Time to the barrier and ops/s against N, ours vs torch's libuv server, interleaved."""
    sizes: list[int] = ctx.pick([1000, 4000, 16000], [1000, 4000], [200])
    repeats: int = ctx.pick(5, 3, 1)  # connection storms vary run to run: more than 2
    torch_python = ctx.peers.torch_python
    kinds = {"ours": ctx.python}
    if torch_python is not None:
        kinds["libuv"] = torch_python
    wrap, resolver = _resolver_wrap(ctx)
    room = _fd_room()
    runs: dict[tuple[str, int], list[dict]] = {(k, n): [] for k in kinds for n in sizes}
    rows: list[Row] = []
    for n in sizes:
        if n + 256 > room:
            rows.append(skipped(f"{n:,} clients", f"needs {n + 256} descriptors, {room} allowed"))
            continue
        procs = max(2, min(4, n // 2000))
        for _ in range(repeats):
            for kind, python in kinds.items():
                runs[(kind, n)].append(one_run(ctx, python, kind, n, procs, wrap))
    label = {"ours": "trainlaunch agent", "libuv": "torch TCPStore (libuv)"}
    barrier_line: dict[str, Points] = {label[k]: [] for k in kinds}
    ops_line: dict[str, Points] = {label[k]: [] for k in kinds}
    for n in sizes:
        mine = runs[("ours", n)]
        if not mine:
            continue
        theirs = runs.get(("libuv", n)) or []
        for kind, rs in (("ours", mine), ("libuv", theirs)):
            if rs:
                barrier_line[label[kind]].append((float(n), _median(rs, "barrier")))
                ops_line[label[kind]].append((float(n), _median(rs, "ops_s")))
        peer = "torch libuv" if theirs else "-"
        goal = Target("<=", 1.5) if n == GOAL_N else None
        rows.append(
            compare(
                f"{n:,} clients: time to the barrier",
                _median(mine, "barrier"),
                seconds,
                peer,
                _median(theirs, "barrier") if theirs else None,
                goal,
            )
        )
        rows.append(
            compare(
                f"{n:,} clients: last connection made",
                _median(mine, "connected"),
                seconds,
                peer,
                _median(theirs, "connected") if theirs else None,
            )
        )
        rows.append(
            compare(
                f"{n:,} clients: ops/s",
                _median(mine, "ops_s"),
                per_second,
                peer,
                _median(theirs, "ops_s") if theirs else None,
            )
        )
        rows.append(
            compare(
                f"{n:,} clients: server CPU",
                _median(mine, "cpu"),
                seconds,
                peer,
                _median(theirs, "cpu") if theirs else None,
            )
        )
        failed = max(r["failed"] for r in mine)
        rows.append(
            compare(
                f"{n:,} clients: failed clients (worst run)",
                float(failed),
                lambda v: f"{v:.0f}",
                peer,
                float(max(r["failed"] for r in theirs)) if theirs else None,
                Target("<=", 0, on="value"),
            )
        )
    rows.append(
        Row("peer check (whose socket is it?) per connection", f"{_peer_check_us():.1f} us")
    )
    why = {w: c for rs in runs.values() for r in rs for w, c in r["why"].items()}
    notes = [
        f"median of {repeats} interleaved runs per size; client processes: "
        f"{', '.join(str(max(2, min(4, n // 2000))) for n in sizes)}; {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end",
        "each client: handshake, ADD init/, SET its address, barrier (ADD, SET last, WAIT), "
        "WAIT+GET a peer's address: 8-9 requests, strictly one in flight",
        "server CPU: the server process after it started listening (torch's import excluded)",
        f"last connection made: beyond net.core.somaxconn ({_somaxconn()}) simultaneous "
        "connects, the kernel drops SYNs and clients retry after 1, 3, 7 s, for either server",
        f"target: time to the barrier <= 1.5 x torch's at {GOAL_N:,} clients; no failure",
        resolver,
    ]
    if torch_python is None:
        notes.append(f"torch's server: SKIP ({ctx.peers.why('torch')})")
    if why:
        notes.append("failures: " + ", ".join(f"{w} x{c}" for w, c in sorted(why.items())))
    series: dict[str, Points | dict[str, Points]] = {
        "c10d store: time to the barrier (s) vs clients": barrier_line,
        "c10d store: ops per second vs clients": ops_line,
    }
    return [Table("10. c10d store at scale (the agent's vs torch's libuv)", rows, notes, series)]
