"""8. Supervisor cost per replica: 256 replicas of a trivial process (`bash -c true`).

Ours: ``trainlaunch run utils.sh --num-replicas 256 true``; wall from the CLI's start to the
supervisor's exit, and the supervisor's own CPU time (not its replicas'). Peers doing the same
job: ``torchx run -s local_cwd utils.sh --num_replicas 256 true`` (TorchX's process owns the
replicas) and ``torchrun --nproc-per-node 256 --no-python bash -c true``; their own CPU time
likewise. CPU times come from each launcher's zombie (scripts/reaper_probe.py).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

from bench.context import SCRIPTS, Context
from bench.harness import BenchError, Row, Table, Target, compare, seconds

NAME = "supervisor"


def probe(ctx: Context, mode: str, argv: list[str], env: dict[str, str]) -> dict[str, float]:
    """One run under the reaper probe."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / "reaper_probe.py"), mode, *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ctx.scratch,
        timeout=600,
    )
    if proc.returncode != 0:
        raise BenchError(f"probe {argv[:4]} failed: {proc.stderr.strip()[-600:]}")
    result = dict(json.loads(proc.stdout.strip().splitlines()[-1]))
    if result.get("exit_code"):
        raise BenchError(f"{' '.join(argv[:6])} exited {result['exit_code']}")
    return result


def run(ctx: Context) -> list[Table]:
    """Per-replica wall and launcher CPU, round-robin over the launchers."""
    n: int = ctx.pick(256, 256, 4)
    launchers: dict[str, tuple[str, list[str], dict[str, str]]] = {
        "trainlaunch": (
            "detached",
            [*ctx.tl, "run", "utils.sh", "--num-replicas", str(n), "true"],
            ctx.env(),
        )
    }
    if ctx.peers.torchx is not None:
        launchers["torchx run -s local_cwd"] = (
            "foreground",
            [
                str(ctx.peers.torchx),
                "run",
                "-s",
                "local_cwd",
                "utils.sh",
                "--num_replicas",
                str(n),
                "true",
            ],
            ctx.peer_env(),
        )
    if ctx.peers.torchrun is not None:
        launchers["torchrun --no-python"] = (
            "foreground",
            [
                str(ctx.peers.torchrun),
                "--standalone",
                "--nproc-per-node",
                str(n),
                "--no-python",
                "bash",
                "-c",
                "true",
            ],
            ctx.env(),
        )
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in launchers}
    for _ in range(ctx.pick(3, 1, 1)):
        for name, (mode, argv, env) in launchers.items():
            runs[name].append(probe(ctx, mode, argv, env))

    def med(name: str, key: str) -> float:
        value: float = statistics.median([float(r[key]) for r in runs[name]])
        return value / n

    rows: list[Row] = []
    for what, key in (("wall per replica", "wall"), ("launcher CPU per replica", "self_cpu")):
        peers = [p for p in launchers if p != "trainlaunch"]
        if not peers:
            rows.append(compare(what, med("trainlaunch", key), seconds))
        for peer in peers:
            rows.append(compare(what, med("trainlaunch", key), seconds, peer, med(peer, key)))
    rows.append(
        compare(
            "replica CPU per replica (bash -c true)", med("trainlaunch", "children_cpu"), seconds
        )
    )
    notes = [
        f"{n} replicas, median of {len(runs['trainlaunch'])} runs; ours = supervisor "
        "(wall from `run` to the supervisor's exit), peers = their own process",
        "no target was set: the rows show where the per-replica cost stands",
    ]
    tables = [Table(f"8. supervisor cost per replica ({n} replicas)", rows, notes)]
    return tables + scale_tables(ctx)


def scale_tables(ctx: Context) -> list[Table]:
    """Per-replica supervisor cost at 16, 64 and 256 replicas (flat?), and a dist.ddp node
    of 16 and 64 workers (the agent's per-worker cost): trivial replicas, interleaved."""
    sizes: list[int] = ctx.pick([16, 64, 256], [16, 64, 256], [2, 4])
    workers: list[int] = ctx.pick([16, 64], [16, 64], [2])
    runs: dict[str, list[dict[str, float]]] = {}
    for _ in range(ctx.pick(3, 1, 1)):
        for size in sizes:
            argv = [*ctx.tl, "run", "utils.sh", "--num-replicas", str(size), "true"]
            runs.setdefault(f"sup {size}", []).append(probe(ctx, "detached", argv, ctx.env()))
        for size in workers:
            argv = [*ctx.tl, "run", "dist.ddp", "--nproc", str(size), "--no-python", "true"]
            runs.setdefault(f"agent {size}", []).append(probe(ctx, "detached", argv, ctx.env()))

    def per(name: str, key: str, n: int) -> float:
        return float(statistics.median(r[key] for r in runs[name])) / n

    rows: list[Row] = []
    series: dict[str, list[tuple[float, float]]] = {"supervisor wall per replica (s)": []}
    base = per(f"sup {sizes[0]}", "wall", sizes[0])
    for size in sizes:
        wall = per(f"sup {size}", "wall", size)
        series["supervisor wall per replica (s)"].append((float(size), wall))
        goal = Target("<=", 1.5) if size == sizes[-1] else None  # flat: within 1.5x of 16's
        rows.append(
            compare(
                f"supervisor wall per replica, {size}",
                wall,
                seconds,
                f"per replica at {sizes[0]}",
                base,
                goal,
            )
        )
        rows.append(
            compare(
                f"supervisor CPU per replica, {size}", per(f"sup {size}", "self_cpu", size), seconds
            )
        )
    for size in workers:
        rows.append(
            compare(
                f"dist.ddp node of {size} workers: wall per worker",
                per(f"agent {size}", "wall", size),
                seconds,
            )
        )
    notes = [
        "trainlaunch only; wall from `run` to the supervisor's exit, per replica/worker; "
        f"median of {len(runs[f'sup {sizes[0]}'])} runs",
        "target: per-replica wall at the largest size <= 1.5 x that at the smallest (flat)",
        "dist.ddp rows: `dist.ddp --nproc N --no-python true` (the node agent starts N workers)",
    ]
    return [Table("8b. supervisor and agent at scale", rows, notes, series=series)]
