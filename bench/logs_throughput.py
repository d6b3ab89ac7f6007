"""5. `logs` of a 1,000,000-line log vs `cat`; `logs -f` latency from write to print.

Throughput: both commands write into a pipe that this process drains; the target compares the
streaming rate (lines per second between the first and the last byte received), because the
start-up of a Python CLI (~0.1 s, benchmark 1) is longer than `cat` needs for the whole file;
the whole-command times are shown too.

Latency: a real replica (scripts/follow_writer.py) prints wall-clock timestamps; `trainlaunch
logs -f` and `tail -f` follow the same replica log at the same time, and a reader thread per
follower timestamps each line on arrival. TorchX has no number here: `torchx log` of a
local_cwd app from another process waits forever.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from bench.context import SCRIPTS, Context
from bench.harness import BenchError, Row, Table, Target, compare, per_second, seconds

NAME = "logs"


def write_big_log(path: Path, lines: int) -> int:
    """A training-like log of `lines` lines; its size in bytes."""
    chunk = 10_000
    with open(path, "w") as f:
        for start in range(0, lines, chunk):
            f.write(
                "".join(
                    f"step {i:7d} loss {1.0 / (i + 1):.6f} lr 0.000100 tokens/s {(i * 7919) % 99991}"
                    f".5 grad_norm {((i * 31) % 997) / 100:.2f}\n"
                    for i in range(start, min(start + chunk, lines))
                )
            )
    return path.stat().st_size


def stream(argv: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """Run argv into a pipe drained here: (whole wall, first-to-last-byte seconds, lines)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        list(argv),
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    fd, first, lines = proc.stdout.fileno(), 0.0, 0
    while True:
        data = os.read(fd, 1 << 20)
        if not data:
            break
        if not first:
            first = time.perf_counter()
        lines += data.count(b"\n")
    last = time.perf_counter()
    proc.stdout.close()
    if proc.wait() != 0:
        raise BenchError(f"{' '.join(argv)} exited {proc.returncode}")
    return time.perf_counter() - t0, max(last - first, 1e-9), lines


def throughput(ctx: Context) -> list[Row]:
    """logs vs logs --raw vs cat on one big replica log, round-robin."""
    count: int = ctx.pick(1_000_000, 1_000_000, 5_000)
    handle = ctx.finished_app()
    home = ctx.fresh_dir("logs-home")
    home.chmod(0o700)
    (home / "apps").mkdir(mode=0o700)
    app = home / "apps" / ctx.app_dir(handle).name
    shutil.copytree(ctx.app_dir(handle), app)
    log = next(app.glob("logs/*/0/stdout.log"))
    size = write_big_log(log, count)
    (log.parent / "stderr.log").write_text("")
    combined = log.parent / "combined.log"  # what `logs` reads (both streams in order)
    if combined.exists():
        shutil.copyfile(log, combined)
        log = combined
    env = ctx.env(home)
    cases = {
        "logs": [*ctx.tl, "logs", handle],
        "logs --raw": [*ctx.tl, "logs", "--raw", handle],
        "cat": ["cat", str(log)],
    }
    runs: dict[str, list[tuple[float, float, int]]] = {k: [] for k in cases}
    for _ in range(ctx.pick(5, 3, 1)):
        for name, argv in cases.items():
            result = stream(argv, env, ctx.scratch)
            if result[2] != count:
                raise BenchError(f"{name} printed {result[2]} lines, expected {count}")
            runs[name].append(result)

    def rate(name: str) -> float:
        span: float = statistics.median([r[1] for r in runs[name]])
        return count / span

    def wall(name: str) -> float:
        return statistics.median(r[0] for r in runs[name])

    label = f"{count:,} lines ({size / 2**20:.0f} MiB)"
    return [
        compare(
            f"logs, {label}: streaming rate",
            rate("logs"),
            per_second,
            "cat",
            rate("cat"),
            Target(">=", 0.6),
        ),
        compare("logs --raw: streaming rate", rate("logs --raw"), per_second, "cat", rate("cat")),
        compare("logs: whole command", wall("logs"), seconds, "cat", wall("cat")),
    ]


def _reader(
    proc: subprocess.Popen[bytes], arrivals: list[tuple[float, bytes]], ready: threading.Event
) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        arrivals.append((time.time(), line))
        if b"ready" in line:
            ready.set()


def follow_latency(ctx: Context) -> list[Row]:
    """Latency from a replica printing a line to `logs -f` (and `tail -f`) printing it."""
    count, interval = ctx.pick((40, 0.1), (20, 0.1), (3, 0.02))
    go = ctx.scratch / "follow-go"
    go.unlink(missing_ok=True)
    handle = ctx.launch(
        "utils.python", str(SCRIPTS / "follow_writer.py"), str(go), str(count), str(interval)
    )
    log = ctx.app_dir(handle) / "logs" / "follow_writer" / "0" / "stdout.log"
    deadline = time.monotonic() + 60
    while not log.exists():
        if time.monotonic() > deadline:
            raise BenchError(f"{log} never appeared")
        time.sleep(0.01)
    followers = {
        "logs -f": [*ctx.tl, "logs", "-f", handle],
        "tail -f": ["tail", "-n", "+1", "-f", str(log)],
    }
    procs: dict[str, subprocess.Popen[bytes]] = {}
    arrivals: dict[str, list[tuple[float, bytes]]] = {}
    events: dict[str, threading.Event] = {}
    for name, argv in followers.items():
        procs[name] = subprocess.Popen(
            argv, env=ctx.env(), cwd=ctx.scratch, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
        )
        arrivals[name], events[name] = [], threading.Event()
        t = threading.Thread(
            target=_reader, args=(procs[name], arrivals[name], events[name]), daemon=True
        )
        t.start()
    try:
        for name, event in events.items():
            if not event.wait(60):
                raise BenchError(f"{name} never printed the replica's first line")
        go.touch()
        ctx.wait_terminal(handle)
        t0 = time.monotonic()
        procs["logs -f"].wait(timeout=30)
        exit_after = time.monotonic() - t0
        deadline = time.monotonic() + 10
        while sum(b"ts " in ln for _, ln in arrivals["tail -f"]) < count:
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                p.wait()
    lat = {
        name: sorted(t - float(ln.split(b"ts ")[-1]) for t, ln in arr if b"ts " in ln)
        for name, arr in arrivals.items()
    }
    for name, values in lat.items():
        if len(values) != count:
            raise BenchError(f"{name} printed {len(values)} of {count} timestamp lines")

    def p95(values: list[float]) -> float:
        return values[min(len(values) - 1, int(0.95 * len(values)))]

    return [
        compare(
            f"logs -f latency, median of {count} lines",
            statistics.median(lat["logs -f"]),
            seconds,
            "tail -f",
            statistics.median(lat["tail -f"]),
            Target("<=", 0.2, on="value", unit="s"),
        ),
        compare(
            "logs -f latency, p95",
            p95(lat["logs -f"]),
            seconds,
            "tail -f",
            p95(lat["tail -f"]),
            Target("<=", 0.1, on="value", unit="s"),
        ),
        compare("logs -f exits after the app ended", exit_after, seconds),
    ]


def run(ctx: Context) -> list[Table]:
    """Both halves in one table."""
    rows = throughput(ctx) + follow_latency(ctx)
    notes = [
        "streaming rate: lines / (last byte - first byte received), median of the runs; "
        "both commands write into a pipe",
        "latency: replica prints time.time(); the reader stamps arrival; same machine clock",
        "TorchX: `torchx log` of a local_cwd app from another process never returns",
    ]
    return [Table("5. logs throughput and follow latency", rows, notes)]
