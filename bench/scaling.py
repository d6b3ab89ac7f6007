"""9. How cost grows with the work: apps in the store, records in a metrics file, Slurm size.

Series (each point measured in this run, round-robin where it runs a command):
- ``list`` against stores of 100, 1,000 and 10,000 finished apps (targets: 1,000 <= 0.3 s,
  10,000 <= 0.6 s), with ``status --json`` of one app in the biggest store (flat);
- ``trainlaunch metrics`` (the summary table) of one rank file of 10,000, 1,000,000 and
  10,000,000 records (target: 10,000,000 <= 2 s) and its peak RSS (bounded);
- Slurm, in process: rendering a 1,000-node ``dist.ddp`` batch script (<= 0.2 s) and parsing
  5,000 rows of ``sacct -P`` output (<= 0.5 s), the shape ``list -s slurm`` feeds the parser.
Every series is also returned for ``bench/run.py --plot DIR``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from bench.context import Context
from bench.harness import Table, Target, cmd_case, compare, measure, mib, seconds
from bench.store_scale import clone_apps

NAME = "scaling"
RECORD = (
    '{"step":%d,"epoch":0,"timestamp":"2026-12-01T10:00:00.000Z","rank":0,"loss":0.6931471805599453,'
    '"grad_norm":3.5,"lr":0.0001,"tokens_per_s":112245.6,"mem_gb":31.5,"step_time":0.25,'
    '"val_loss":0.7,"scale":1024.0}\n'
)
NAMES = ("loss", "grad_norm", "lr", "tokens_per_s", "mem_gb", "step_time", "val_loss", "scale")


def metrics_file(directory: Path, records: int) -> Path:
    """A rank file of ``records`` 8-metric records (and its names list), written in blocks."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "rank0.jsonl"
    with open(path, "w") as f:
        for start in range(0, records, 100_000):
            f.write("".join(RECORD % s for s in range(start, min(records, start + 100_000))))
    names = '{"rank":0}\n' + "".join(json.dumps(n) + "\n" for n in NAMES)
    Path(str(path) + ".names").write_text(names)
    return path


def store_series(ctx: Context) -> tuple[list, list[tuple[float, float]]]:
    """list wall time against the number of finished apps."""
    sizes = ctx.pick([100, 1_000, 10_000], [100, 1_000, 10_000], [5, 20])
    handle = ctx.finished_app()
    template = ctx.app_dir(handle)
    cases = {}
    for size in sizes:
        home = ctx.fresh_dir(f"scale-store-{size}")
        (home / "apps").mkdir(mode=0o700, parents=True)
        home.chmod(0o700)
        shutil.copytree(template, home / "apps" / template.name)
        clone_apps(template, home / "apps", size - 1)
        env = ctx.env(home)
        cases[f"list {size}"] = cmd_case([*ctx.tl, "list"], env=env, cwd=ctx.scratch)
        if size == sizes[-1]:
            cases["status big"] = cmd_case(
                [*ctx.tl, "status", "--json", handle], env=env, cwd=ctx.scratch
            )
    stats = measure(cases, repeats=ctx.pick(5, 3, 1), warmup=1)  # the warm-up builds the index
    goals = {
        1_000: Target("<=", 0.3, on="value", unit="s"),
        10_000: Target("<=", 0.6, on="value", unit="s"),
    }
    rows = [
        compare(f"list, {size:,} apps", stats[f"list {size}"].wall, seconds, target=goals.get(size))
        for size in sizes
    ]
    rows.append(
        compare(
            f"status --json, {sizes[-1]:,} apps",
            stats["status big"].wall,
            seconds,
            f"list, {sizes[0]:,} apps",
            stats[f"list {sizes[0]}"].wall,
        )
    )
    return rows, [(float(s), stats[f"list {s}"].wall) for s in sizes]


def metrics_series(ctx: Context) -> tuple[list, list[tuple[float, float]]]:
    """The metrics summary's wall time and peak RSS against the records in the file."""
    sizes = ctx.pick([10_000, 1_000_000, 10_000_000], [10_000, 1_000_000], [1_000])
    handle = ctx.finished_app()
    cases = {}
    for size in sizes:
        path = metrics_file(ctx.fresh_dir(f"scale-metrics-{size}"), size)
        cases[str(size)] = cmd_case(
            [*ctx.tl, "metrics", handle, "--path", str(path)], env=ctx.env(), cwd=ctx.scratch
        )
    stats = measure(cases, repeats=ctx.pick(3, 3, 1), warmup=1)
    rows = []
    for size in sizes:
        goal = Target("<=", 2.0, on="value", unit="s") if size >= 10_000_000 else None
        rows.append(
            compare(
                f"metrics summary, {size:,} records", stats[str(size)].wall, seconds, target=goal
            )
        )
    rows.append(
        compare(
            f"metrics summary peak RSS, {sizes[-1]:,} records",
            stats[str(sizes[-1])].maxrss_kib / 1024,
            mib,
        )
    )
    return rows, [(float(s), stats[str(s)].wall) for s in sizes]


def slurm_rows(ctx: Context) -> list:
    """Rendering a 1,000-node job and parsing 5,000 sacct rows, in this process."""
    from trainlaunch import settings
    from trainlaunch.schedulers import get_scheduler
    from trainlaunch.schedulers.slurm.status import parse_sacct
    from trainlaunch.specs import AppDef, Resource, Role

    nodes = ctx.pick(1_000, 1_000, 50)
    role = Role(
        "trainer",
        "python3",
        ("-m", "trainlaunch.agent", "--nnodes", str(nodes), "--nproc-per-node", "8", "train.py"),
        num_replicas=nodes,
        resource=Resource(cpu=8, gpu=8, memMB=65536),
    )
    app = AppDef("big", [role])
    sched = get_scheduler("slurm", "bench", environ={settings.HOME: str(ctx.home)})
    render = []
    for _ in range(5):
        t0 = time.perf_counter()
        text = str(sched.submit_dryrun(app, {}))
        render.append(time.perf_counter() - t0)
    states = ("COMPLETED", "FAILED", "CANCELLED by 0", "RUNNING", "PENDING", "TIMEOUT")
    rows_n = ctx.pick(5_000, 5_000, 100)
    sacct = "".join(
        f"{1000 + i}|job-{i}|{states[i % 6]}|{i % 3}:0|n[{i % 7}-{i % 7 + 1}]\n"
        f"{1000 + i}.batch|batch|{states[i % 6]}|0:0|n{i % 7}\n"
        for i in range(rows_n)
    )
    parse = []
    for _ in range(5):
        t0 = time.perf_counter()
        found = parse_sacct(sacct)
        parse.append(time.perf_counter() - t0)
    assert len(found) == rows_n and text
    return [
        compare(
            f"slurm: render a {nodes:,}-node dist.ddp job",
            sorted(render)[2],
            seconds,
            target=Target("<=", 0.2, on="value", unit="s"),
        ),
        compare(
            f"slurm: parse {rows_n:,} sacct -P rows (+ steps)",
            sorted(parse)[2],
            seconds,
            target=Target("<=", 0.5, on="value", unit="s"),
        ),
    ]


def run(ctx: Context) -> list[Table]:
    """The three series and the Slurm rows."""
    store_rows, store_points = store_series(ctx)
    metric_rows, metric_points = metrics_series(ctx)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    tables = [
        Table(
            "9. scaling: apps in the store",
            store_rows,
            [
                "wall time, median of interleaved runs after a warm-up run (which builds the list index)"
            ],
            series={"list wall time (s) vs finished apps": store_points},
        ),
        Table(
            "9. scaling: records in a metrics file",
            metric_rows,
            [
                "`trainlaunch metrics HANDLE --path FILE` (the summary table); the file has a names list"
            ],
            series={"metrics summary wall time (s) vs records": metric_points},
        ),
        Table(
            "9. scaling: Slurm", slurm_rows(ctx), [f"in process, median of 5; load average {load}"]
        ),
    ]
    return tables
