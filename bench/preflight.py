"""11. What ``run --preflight`` adds to a 2-node job: local and Slurm, side by side.

The job is the smallest distributed one (scripts/gloo_min.py), 2 nodes x 1 rank, run with
``run --wait`` with and without ``--preflight``, interleaved; the added wall time is the
difference of the medians. Its peer is one ``python -c "import torch"`` measured in the same
run: the preflight's probe imports torch once per rank before the real ranks import it again,
so about one import is the floor of what it can add. Target (issue 25): <= 10 s for 2 nodes.
The preflight's own figure (node 0's agent, recorded in ``describe``) is shown as well.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
from collections.abc import Callable

from bench.context import SCRIPTS, Context
from bench.harness import Row, Sample, Table, Target, cmd_case, compare, measure, seconds, skipped

NAME = "preflight"
SCRIPT = SCRIPTS / "gloo_min.py"
TARGET = Target("<=", 10.0, on="value", unit="s")


def _cases(ctx: Context, scheduler: str) -> dict[str, Callable[[], Sample]]:
    run = [*ctx.tl, "run", "-s", scheduler, "--wait"]
    job = ["dist.ddp", "-j", "2x1", "--env", "OMP_NUM_THREADS=1", str(SCRIPT)]
    env = ctx.env()
    if scheduler == "slurm":  # the snapshot copies the scratch dir: run from an empty one
        job = [*job[:-1], "gloo_min.py"]
        shutil.copy(SCRIPT, ctx.fresh_dir("slurm-work") / "gloo_min.py")
    cwd = ctx.scratch / "slurm-work" if scheduler == "slurm" else ctx.scratch
    return {
        "with": cmd_case([*run, "--preflight", *job], env=env, cwd=cwd),
        "without": cmd_case([*run, *job], env=env, cwd=cwd),
        "import torch": cmd_case([str(ctx.python), "-c", "import torch"], env=env),
    }


def _recorded(ctx: Context, scheduler: str) -> list[float]:
    """The preflight seconds node 0's agent recorded, for every app of this scheduler."""
    out = []
    apps = json.loads(ctx.tl_out("list", "-s", scheduler, "--json"))
    for app in apps:
        doc = json.loads(ctx.tl_out("describe", "--json", app["handle"]))
        recorded = (doc.get("metadata") or {}).get("preflight")
        if recorded:
            out.append(float(recorded["seconds"]))
    return out


def _rows(ctx: Context, scheduler: str, repeats: int) -> list[Row]:
    stats = measure(_cases(ctx, scheduler), repeats=repeats, warmup=1)
    added = stats["with"].wall - stats["without"].wall
    where = f"{scheduler} 2x1"
    rows = [
        compare(
            f"added wall, {where}", added, seconds, "one import torch", stats["import torch"].wall
        ),
        compare(f"added wall, {where}", added, seconds, target=TARGET),
        compare(
            f"job with --preflight, {where}",
            stats["with"].wall,
            seconds,
            "without",
            stats["without"].wall,
        ),
    ]
    recorded = _recorded(ctx, scheduler)
    if recorded:
        rows.append(
            compare(
                f"preflight as recorded (node 0), {where}",
                statistics.median(recorded),
                seconds,
                target=TARGET,
            )
        )
    for i, (w, wo) in enumerate(zip(stats["with"].walls, stats["without"].walls, strict=True), 1):
        rows.append(compare(f"{where} run {i}: with", w, seconds, "without", wo))
    return rows


def run(ctx: Context) -> list[Table]:
    """Local always; Slurm when a cluster answers."""
    if ctx.peers.torch_python != ctx.python:
        why = "torch is not importable by our interpreter (the ranks need it)"
        return [Table("11. preflight cost", [skipped("preflight", why)])]
    repeats: int = ctx.pick(3, 2, 1)
    rows = _rows(ctx, "local", repeats)
    if shutil.which("sinfo") and subprocess.run(["sinfo"], capture_output=True).returncode == 0:
        rows += _rows(ctx, "slurm", repeats)
    else:
        rows.append(skipped("added wall, slurm 2x1", "no Slurm cluster answers", TARGET))
    load = os.getloadavg()
    notes = [
        f"median of {repeats} interleaved runs after one warm-up; added = median(with) - median(without)",
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} CPUs "
        "(the added time is mostly imports of torch: it grows with the load)",
    ]
    return [Table("11. preflight cost (run --preflight, 2 nodes)", rows, notes)]
