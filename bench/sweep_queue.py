"""13. A local sweep's queue: N points with ``--max-parallel 4`` (100 / 1,000 / 10,000).

``trainlaunch sweep --param i=0,...,N-1 --max-parallel 4 --no-snapshot utils.sh "sleep 600 #
{i}"`` from an empty directory, into a fresh store. Measured: the submission (wall and the
CLI's CPU), the supervisors alive during and after it (processes whose command line is the
supervisor and whose environment names the store), the store's bytes on disk and the
processes' RSS per queued point, the CPU every process of the store uses in 5 s of waiting,
and ``status SWEEP`` / ``stop SWEEP`` (wall). Targets (issue 26 #2): at 10,000 points the
submission <= 30 s, <= 4 supervisors, <= 1 MiB per queued point, no CPU while waiting,
status and stop <= 2 s. No peer runs here: the design this replaced (one polling supervisor
per point) took 487 s and 9.4 GiB for 1,000 points (issue 23 #7), too much for a shared
machine; TorchX's local scheduler has no queue.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from bench.context import Context
from bench.harness import Row, Table, Target, compare, mib, run_cmd, seconds

NAME = "queue"
K = 4
SUPERVISOR = b"trainlaunch.schedulers.local.supervisor"


def store_pids(home: Path) -> list[int]:
    """Live processes started against this store (their environment names it)."""
    needle = f"TRAINLAUNCH_HOME={home}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        out.append(int(entry))
    return out


def supervisors(home: Path) -> list[int]:
    """The store's live supervisors."""
    out = []
    for pid in store_pids(home):
        try:
            if SUPERVISOR in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
        except OSError:
            continue
    return out


def cpu_ticks(pids: list[int]) -> int:
    """utime + stime of the processes, in clock ticks."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total


def rss_bytes(pids: list[int]) -> int:
    """The processes' resident memory together."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def disk_bytes(root: Path) -> int:
    """Bytes the store's files take on disk (allocated blocks, the final record's reserve too)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total


def wait_for(predicate: object, timeout: float) -> None:
    """Poll until predicate() is true (a BenchError-free timeout: the row shows what it saw)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():  # type: ignore[operator]
        time.sleep(0.05)


def one_size(ctx: Context, n: int) -> dict[str, float]:
    """Submit, observe, query and stop one sweep of n points."""
    home = ctx.fresh_dir(f"queue-home-{n}")
    home.chmod(0o700)
    cwd = ctx.fresh_dir(f"queue-cwd-{n}")
    env = ctx.env(home)
    peak = [0]
    done = threading.Event()

    def watch() -> None:  # the most supervisors alive at once during the submission
        while not done.is_set():
            peak[0] = max(peak[0], len(supervisors(home)))
            done.wait(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    values = ",".join(str(i) for i in range(n))
    argv = [*ctx.tl, "sweep", "--param", f"i={values}", "--max-parallel", str(K)]
    argv += ["--no-snapshot", "utils.sh", "sleep 600 # {i}"]
    submit = run_cmd(argv, env=env, cwd=cwd, timeout=1800)
    done.set()
    watcher.join()
    handle = "local://trainlaunch/sweep:" + next((home / "sweeps").iterdir()).name
    wait_for(lambda: len(supervisors(home)) >= min(K, n), 60)
    pids = store_pids(home)
    sups = len(supervisors(home))
    t0, c0 = time.monotonic(), cpu_ticks(pids)
    time.sleep(5.0)  # a measurement window, not a synchronisation
    cores = (cpu_ticks(pids) - c0) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - t0)
    rss = rss_bytes(pids)
    disk = disk_bytes(home)
    status = run_cmd([*ctx.tl, "status", handle], env=env, cwd=cwd, timeout=600)
    stop = run_cmd([*ctx.tl, "stop", handle], env=env, cwd=cwd, timeout=600)
    wait_for(lambda: not store_pids(home), 120)
    queued = max(n - K, 1)
    return {
        "submit": submit.wall,
        "submit_cpu": submit.cpu,
        "peak_supervisors": float(max(peak[0], sups)),
        "supervisors": float(sups),
        "disk_per_point": disk / n,
        "rss_per_queued": rss / queued,
        "rss_total": float(rss),
        "cores_waiting": cores,
        "status": status.wall,
        "stop": stop.wall,
        "left": float(len(store_pids(home))),
    }


def run(ctx: Context) -> list[Table]:
    """Every size once (a 10,000-point sweep is one long measurement on its own)."""
    sizes: tuple[int, ...] = ctx.pick((100, 1000, 10000), (100, 1000), (20,))
    results = {n: one_size(ctx, n) for n in sizes}
    rows: list[Row] = []
    big = max(sizes)
    for n, r in results.items():
        at = f"{n:,} points"
        last = n == big  # the targets are on the largest size of this mode
        rows += [
            compare(
                f"submit, {at}",
                r["submit"],
                seconds,
                target=Target("<=", 30.0, on="value", unit="s") if last else None,
            ),
            compare(f"submit CPU, {at}", r["submit_cpu"], seconds),
            compare(
                f"supervisors alive (most seen), {at}",
                r["peak_supervisors"],
                lambda v: f"{v:.0f}",
                target=Target("<=", K, on="value") if last else None,
            ),
            compare(
                f"store on disk per point, {at}",
                r["disk_per_point"],
                lambda v: f"{v / 1024:.0f} KiB",
                target=Target("<=", 1 << 20, on="value", unit="B") if last else None,
            ),
            compare(
                f"RSS per queued point, {at}",
                r["rss_per_queued"],
                lambda v: f"{v / 1024:.1f} KiB",
                target=Target("<=", 1 << 20, on="value", unit="B") if last else None,
            ),
            compare(
                f"CPU while waiting (cores), {at}",
                r["cores_waiting"],
                lambda v: f"{v:.3f}",
                target=Target("<=", 0.01, on="value") if last else None,
            ),
            compare(
                f"status SWEEP, {at}",
                r["status"],
                seconds,
                target=Target("<=", 2.0, on="value", unit="s") if last else None,
            ),
            compare(
                f"stop SWEEP, {at}",
                r["stop"],
                seconds,
                target=Target("<=", 2.0, on="value", unit="s") if last else None,
            ),
        ]
    notes = [
        f"one run per size; --max-parallel {K}; points `sleep 600`; --no-snapshot (a snapshot "
        "is one copy of the project per point, whatever the queue)",
        "RSS per queued point: every process of the store (the 4 supervisors and their "
        "replicas) over the queued points; totals: "
        + ", ".join(f"{n:,}: {mib(r['rss_total'] / 2**20)}" for n, r in results.items()),
        "store on disk per point: the app's records, its 64 KiB reserve for the final record "
        "and its queue entry",
        "stop SWEEP: the queued points are CANCELLED at once (their group is closed); the 4 "
        "running ones get SIGTERM; processes left after it: "
        + ", ".join(f"{n:,}: {r['left']:.0f}" for n, r in results.items()),
        "before (one polling supervisor per queued point, issue 23 #7): 1,000 points took 487 s "
        "to submit, 988 processes, 9.4 GiB, status 7.3 s, stop 47 s",
    ]
    series = {
        "local sweep queue: submission (s) vs points": [
            (n, r["submit"]) for n, r in results.items()
        ],
        "local sweep queue: memory of the store's processes (MiB) vs points": [
            (n, r["rss_total"] / 2**20) for n, r in results.items()
        ],
        "local sweep queue: status and stop SWEEP (s) vs points": {
            "status": [(n, r["status"]) for n, r in results.items()],
            "stop": [(n, r["stop"]) for n, r in results.items()],
        },
    }
    return [Table("13. a local sweep's queue (--max-parallel 4)", rows, notes, series)]
