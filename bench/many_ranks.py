"""12. Many ranks on one node: 64 and 256 local ranks through our node agent vs torchrun.

Both launchers get torchrun's command line, ``--standalone --nproc-per-node N --no-python
scripts/rank_start.sh`` (ours as ``trainlaunch torchrun ...``, the drop-in: CLI, supervisor
and node agent). Each rank is a bash script that writes its start time (``$EPOCHREALTIME``,
no exec) and its parent's pid, then sleeps; no torch, so the launchers' own costs show.
While the launcher runs, the bench samples every 10 ms the process that started the ranks
(our node agent, or torchrun itself) and every launcher process above it: CPU time
(``/proc/<pid>/stat``, its own, not its children's) and peak RSS (``VmHWM``).

Rows per size: time from the launch until the last rank started; the agent's CPU per rank
(from its start to its last sample, just before it exits: starting, watching the sleeping
ranks, reaping them); the agent's peak RSS; and the sum over every launcher process (ours:
CLI + supervisor + agent). Targets: ahead of torchrun (ratio <= 1) at both sizes, and flat
per rank (256's per-rank cost <= 1.5 x 64's).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from pathlib import Path

from bench.context import SCRIPTS, Context
from bench.harness import MIB, BenchError, Row, Table, Target, compare, mib, seconds

NAME = "ranks"
SCRIPT = SCRIPTS / "rank_start.sh"
TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float | None:
    """Own CPU seconds (utime + stime) of a live process; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def _status(pid: int) -> dict[str, int]:
    """VmHWM (KiB) and PPid of a live process ({} once it is gone)."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmHWM", "PPid"):
                out[key] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        return {}
    return out


def one_run(ctx: Context, argv: list[str], nproc: int, sleep_s: float) -> dict[str, float]:
    """Launch, sample, wait; the run's numbers."""
    starts = ctx.fresh_dir(f"starts-{nproc}")
    env = ctx.env(RANK_STARTS=str(starts), RANK_SLEEP_S=f"{sleep_s:g}")
    t0 = time.time()
    proc = subprocess.Popen(
        argv, env=env, cwd=ctx.scratch, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    agent = 0
    chain: list[int] = []  # the agent and every launcher process above it
    cpu: dict[int, float] = {}
    hwm: dict[int, int] = {}
    all_started = 0.0
    while proc.poll() is None:
        if not agent:
            first = next(iter(sorted(starts.iterdir())), None) if starts.exists() else None
            if first is not None:
                try:
                    agent = int(first.read_text().split()[1])
                except (OSError, IndexError, ValueError):
                    agent = 0
                pid = agent
                while pid and pid != os.getpid():  # up to this process: the launchers
                    chain.append(pid)
                    pid = _status(pid).get("PPid", 0)
        for pid in chain:
            c, st = _cpu(pid), _status(pid)
            if c is not None:
                cpu[pid] = c
            if st.get("VmHWM"):
                hwm[pid] = st["VmHWM"]
        if not all_started and sum(1 for _ in starts.iterdir()) >= nproc:
            all_started = time.time()
        time.sleep(0.01)
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv[:3])} ... exited {proc.returncode}")
    stamps = [float(p.read_text().split()[0]) for p in starts.iterdir()]
    if len(stamps) != nproc or not agent:
        raise BenchError(f"{len(stamps)} of {nproc} ranks started")
    return {
        "started": max(stamps) - t0,
        "agent_cpu": cpu.get(agent, 0.0),
        "agent_hwm": hwm.get(agent, 0) * 1024,
        "launchers_cpu": sum(cpu.values()),
        "launchers_hwm": sum(hwm.values()) * 1024,
        "processes": len(chain),
    }


def run(ctx: Context) -> list[Table]:
    """Ours and torchrun at each size, interleaved; per-rank rows and one chart per series."""
    sizes: tuple[int, ...] = ctx.pick((64, 256), (64, 256), (4,))
    repeats: int = ctx.pick(5, 3, 1)
    common = ["--standalone", "--nproc-per-node", "{n}", "--no-python", str(SCRIPT)]
    launchers = {"trainlaunch torchrun": [*ctx.tl, "torchrun", *common]}
    if ctx.peers.torchrun is not None:
        launchers["torchrun"] = [str(ctx.peers.torchrun), *common]
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _ in range(repeats):
        for n in sizes:
            for name, argv in launchers.items():
                cmd = [a.replace("{n}", str(n)) for a in argv]
                sample = one_run(ctx, cmd, n, sleep_s=2.0 if n <= 64 else 4.0)
                runs.setdefault((name, n), []).append(sample)

    def med(name: str, n: int, key: str) -> float:
        return float(statistics.median(r[key] for r in runs[(name, n)]))

    ours, peer = "trainlaunch torchrun", "torchrun" if "torchrun" in launchers else None
    rows: list[Row] = []
    series: dict[str, dict[str, list[tuple[float, float]]]] = {
        "time until all ranks started (s) vs local ranks": {},
        "node agent CPU per rank (s) vs local ranks": {},
        "node agent peak RSS (MiB) vs local ranks": {},
    }
    metrics = (  # label, key, per rank?, formatter, series
        ("time until all ranks started", "started", False, seconds, 0),
        ("agent CPU per rank", "agent_cpu", True, seconds, 1),
        ("agent peak RSS", "agent_hwm", False, lambda v: mib(v / MIB), 2),
        ("all launcher processes: CPU per rank", "launchers_cpu", True, seconds, None),
        ("all launcher processes: peak RSS (sum)", "launchers_hwm", False, lambda v: mib(v / MIB), None),
    )  # fmt: skip
    titles = list(series)
    for label, key, per_rank, fmt, chart in metrics:
        for n in sizes:
            div = n if per_rank else 1
            mine = med(ours, n, key) / div
            theirs = med(peer, n, key) / div if peer else None
            goal = Target("<=", 1.0) if chart is not None and chart < 2 else None
            rows.append(compare(f"{label}, {n} ranks", mine, fmt, peer or "-", theirs, goal))
            if chart is not None:
                scale = 1 / MIB if key.endswith("hwm") else 1.0
                series[titles[chart]].setdefault(ours, []).append((float(n), mine * scale))
                if theirs is not None:
                    series[titles[chart]].setdefault(peer or "", []).append(
                        (float(n), theirs * scale)
                    )
    if len(sizes) > 1:  # flat: the per-rank cost at the largest size against the smallest's
        lo, hi = sizes[0], sizes[-1]
        for label, key in (
            ("time until all started, per rank", "started"),
            ("agent CPU per rank", "agent_cpu"),
        ):
            rows.append(
                compare(
                    f"{label}: {hi} vs {lo} ranks (flat)", med(ours, hi, key) / hi, seconds,
                    f"per rank at {lo}", med(ours, lo, key) / lo, Target("<=", 1.5),
                )
            )  # fmt: skip
    notes = [
        f"median of {repeats} interleaved runs; `--standalone --nproc-per-node N --no-python "
        "rank_start.sh` (bash: start stamp, then sleep 2 s at 64, 4 s at 256)",
        "agent = the process that started the ranks (ours: the node agent; torchrun: itself); "
        f"launcher processes: ours {med(ours, sizes[0], 'processes'):.0f} (CLI, supervisor, "
        "agent), torchrun 1",
        "CPU: own (utime+stime, not the ranks'), last sample <= 10 ms before the process exits",
    ]
    return [Table("12. many ranks on one node", rows, notes, series=dict(series))]
