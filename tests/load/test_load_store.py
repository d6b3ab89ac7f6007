"""Load (slow tier): many apps and queries at once, and a replica that floods its stdout.

* 50 apps submitted concurrently, then 200 status/list/logs calls in parallel while all 50
  run: every call succeeds and every record stays intact.
* A replica writes ~50 MB/s to stdout for TRAINLAUNCH_LOAD_SECONDS (default 20 s; issue 8
  asks for a minute: `TRAINLAUNCH_LOAD_SECONDS=60 pytest -m slow tests/load`): its log on
  disk holds every line it wrote, and the supervisor's RSS stays flat (< 30 MiB, no trend),
  since output goes straight to files and never through the supervisor.

Concurrency is capped at 8 CLI processes (the CI machine has 2 cores).
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import CLI, pids_alive, wait_until
from tests.faults.fault_helpers import app_processes, running_replicas, supervisor_pid

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # floods disk and CPU: alone

WORKERS = 8
APPS = 50
QUERIES = 200
LOAD_SECONDS = float(os.environ.get("TRAINLAUNCH_LOAD_SECONDS", "20"))
RATE_MB_S = float(os.environ.get("TRAINLAUNCH_LOAD_MB_S", "50"))
LINE = 1024  # bytes per line, newline included


def test_fifty_apps_and_two_hundred_parallel_queries(reaper: CLI) -> None:
    cli = reaper
    gate = cli.cwd / "gate"
    gate.touch()
    # each app prints its index, then blocks (no CPU) on a lock the test holds until released
    body = "echo start-$N; flock -s gate true; echo end-$N"
    with open(gate) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            handles = list(
                pool.map(lambda i: cli.run("utils.sh", "--env", f"N={i}", body), range(APPS))
            )
        submit_s = time.monotonic() - t0
        assert len(set(handles)) == APPS
        for h in handles:
            running_replicas(cli, h, 1, timeout=60)
        wait_until(
            lambda: (
                len(list(cli.home.glob("apps/*/logs/sh/0/stdout.log"))) == APPS
                and all(p.read_bytes() for p in cli.home.glob("apps/*/logs/sh/0/stdout.log"))
            ),
            timeout=60,
            what="every app to print its start line",
        )

        rng = random.Random(8)
        calls = []
        for _ in range(QUERIES):
            i = rng.randrange(APPS)
            calls.append(
                rng.choice(
                    [
                        ("status", "--json", handles[i]),
                        ("list", "--json"),
                        ("logs", "--raw", handles[i]),
                        ("describe", handles[i]),
                    ]
                )
            )

        def query(args: tuple[str, ...]) -> tuple[tuple[str, ...], int, str, str]:
            p = cli(*args, timeout=120)
            return args, p.returncode, p.stdout, p.stderr

        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            results = list(pool.map(query, calls))
        query_s = time.monotonic() - t0
        fcntl.flock(held, fcntl.LOCK_UN)

    failures = [(a, c, e) for a, c, _, e in results if c != 0]
    assert failures == [], failures[:5]
    for args, _, out, _ in results:
        if args[0] == "status":
            assert json.loads(out)["state"] == "RUNNING"
        elif args[0] == "list":
            rows = json.loads(out)
            assert len(rows) == APPS and {r["state"] for r in rows} == {"RUNNING"}
        elif args[0] == "logs":
            n = handles.index(args[2])
            assert out.splitlines() == [f"start-{n}"]

    def all_done() -> list[dict[str, str]] | None:
        rows = json.loads(cli("list", "--json", check=True).stdout)
        return rows if all(r["state"] == "SUCCEEDED" for r in rows) else None

    rows = wait_until(all_done, timeout=120, what="all 50 apps to succeed")
    assert sorted(r["handle"] for r in rows) == sorted(handles)
    for n, h in enumerate(handles):  # every log complete, read from disk
        log = cli.home / "apps" / h.rsplit("/", 1)[1] / "logs" / "sh" / "0" / "stdout.log"
        assert log.read_text().split() == [f"start-{n}", f"end-{n}"]
    for h in handles[:3]:  # and through the CLI for a few
        assert "end-" in cli("logs", "--raw", h, check=True).stdout
    for path in (cli.home / "apps").glob("*/*.json"):
        json.loads(path.read_bytes())  # every record intact
    assert all(app_processes(h) == [] for h in handles)
    print(
        f"\n{APPS} apps submitted in {submit_s:.1f}s; {QUERIES} queries in {query_s:.1f}s "
        f"({QUERIES / query_s:.1f}/s with {WORKERS} workers)"
    )


WRITER = r"""
import os, sys, time
rate, seconds, size = float(sys.argv[1]) * 1e6, float(sys.argv[2]), int(sys.argv[3])
pad = b"x" * (size - 13)
out = sys.stdout.buffer
n, start = 0, time.monotonic()
while True:
    elapsed = time.monotonic() - start
    if elapsed >= seconds:
        break
    due = int(elapsed * rate / size) + 1000  # stay just ahead of the target rate
    block = b"".join(b"%012d" % i + pad + b"\n" for i in range(n, due))
    out.write(block)
    n = due
    ahead = n * size / rate - (time.monotonic() - start)
    if ahead > 0.05:
        time.sleep(ahead - 0.05)
out.flush()
with open(os.environ["WROTE_FILE"], "w") as f:
    f.write(str(n))
"""


def _rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _count_lines(path: Path) -> tuple[int, bytes, bytes]:
    n, first, last = 0, b"", b""
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            if not first:
                first = chunk[:LINE]
            n += chunk.count(b"\n")
            last = chunk
    return n, first, last.rsplit(b"\n", 2)[-2] if last else b""


def test_flooding_replica_log_is_complete_and_supervisor_rss_flat(reaper: CLI) -> None:
    cli = reaper
    (cli.cwd / "writer.py").write_text(WRITER)
    wrote = cli.cwd / "wrote.txt"
    handle = cli.run(
        "utils.python",
        "--env",
        f"WROTE_FILE={wrote}",
        "writer.py",
        str(RATE_MB_S),
        str(LOAD_SECONDS),
        str(LINE),
    )
    running_replicas(cli, handle, 1)
    sup = supervisor_pid(cli, handle)
    samples: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            rss = _rss_kib(sup)
            if rss is None:
                return
            samples.append(rss)
            done.wait(0.25)  # sampling period, not synchronisation

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    final = cli.wait(handle, timeout=LOAD_SECONDS * 3 + 60)
    done.set()
    sampler.join(5)
    assert final["state"] == "SUCCEEDED", final
    # the supervisor exits right after recording the end (it hands its slot on first)
    wait_until(lambda: not pids_alive([sup]), what="the supervisor to exit")
    assert app_processes(handle) == []

    written = int(wrote.read_text())
    log = Path(final["log_dir"]) / "writer" / "0" / "stdout.log"
    lines, first, last = _count_lines(log)
    size = log.stat().st_size
    assert lines == written, f"the log has {lines} lines, the replica wrote {written}"
    assert size == written * LINE
    assert first.startswith(b"%012d" % 0) and last.startswith(b"%012d" % (written - 1))
    mb_s = size / 1e6 / LOAD_SECONDS

    assert len(samples) >= 4, samples
    steady = samples[len(samples) // 4 :]  # after start-up
    third = max(1, len(steady) // 3)
    early, late = statistics.mean(steady[:third]), statistics.mean(steady[-third:])
    peak_mib = max(samples) / 1024
    print(
        f"\nwrote {written} lines ({size / 1e6:.0f} MB, {mb_s:.0f} MB/s) in {LOAD_SECONDS:g}s; "
        f"supervisor RSS {min(samples) / 1024:.1f}-{peak_mib:.1f} MiB over "
        f"{len(samples)} samples"
    )
    assert peak_mib < 30, f"supervisor RSS peaked at {peak_mib:.1f} MiB"
    assert late - early < 1024, f"supervisor RSS grew from {early:.0f} to {late:.0f} KiB"
    if mb_s < RATE_MB_S / 2:
        print(f"note: the writer reached only {mb_s:.0f} MB/s on this machine")
