"""6. MetricLogger records/s vs NeMo Automodel's logger and a raw json.dumps + write loop.

All loggers run in one fresh interpreter (scripts/metrics_worker.py) with the same records:
8 metrics each, buffer 100, written to a local file, every run ending with close(). The
durability rows show what the guarantees cost: ``flush=True`` (fsync every buffer write) and
``flush()`` every 100 records, each against the same logger without them.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from bench.context import SCRIPTS, Context
from bench.harness import BenchError, Row, Table, Target, compare, per_second, skipped

NAME = "metrics"
KINDS = {  # kind: (label, records in full mode)
    "float": ("python floats", 100_000),
    "float-build": ("floats, MetricsSample built in the loop", 50_000),
    "np64": ("numpy float64", 50_000),
    "np32": ("numpy float32", 50_000),
    "tensor": ("0-d float32 tensors (CPU)", 20_000),
    "float-fsync": ("floats, flush=True (fsync per buffer)", 50_000),
    "float-flush100": ("floats, flush() every 100 records", 50_000),
}
SMOKE_KINDS = ("float", "np64", "float-fsync")  # no torch import in the test suite's run
TARGETS = {"float": Target(">=", 5.0), "tensor": Target(">=", 2.0)}


def measure_all(ctx: Context) -> dict[str, dict[str, Any]]:
    """Run the worker; {variant: {"rate", "error"}}."""
    div = ctx.pick(1, 4, 100)
    tmp = ctx.fresh_dir("metrics")
    kinds = ctx.pick(KINDS, KINDS, SMOKE_KINDS)
    cfg = {
        "records": {k: max(n // div, 1000) for k, (_, n) in KINDS.items() if k in kinds},
        "repeats": ctx.pick(3, 3, 1),
        "tmp": str(tmp),
        "nemo": str(ctx.peers.nemo_logger) if ctx.peers.nemo_logger else None,
    }
    proc = subprocess.run(
        [str(ctx.python), str(SCRIPTS / "metrics_worker.py"), json.dumps(cfg)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ctx.scratch,
    )
    if proc.returncode != 0:
        raise BenchError(f"metrics worker failed: {proc.stderr.strip()[-800:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def run(ctx: Context) -> list[Table]:
    """One row per value kind against NeMo (with targets) and raw json; durability costs."""
    res = measure_all(ctx)
    ours_error = res.get("ours/float", {}).get("error")
    if ours_error:
        return [
            Table(
                "6. MetricLogger records/s",
                [skipped("MetricLogger", ours_error)],
                ["trainlaunch.rank is not there yet: this benchmark is skipped"],
            )
        ]
    rows: list[Row] = []
    for kind, (label, _) in KINDS.items():
        if f"ours/{kind}" not in res:
            continue
        mine = res[f"ours/{kind}"]
        if mine["rate"] is None:
            rows.append(skipped(label, mine["error"], TARGETS.get(kind)))
            continue
        for peer, target in (("nemo", TARGETS.get(kind)), ("raw", None)):
            other = res.get(f"{peer}/{kind}")
            if other is None:
                continue
            name = "nemo-automodel 0.7.0" if peer == "nemo" else "json.dumps + write"
            if other["rate"] is None:
                row = skipped(label, other["error"], target, name, per_second(mine["rate"]))
                row.ours_raw = mine["rate"]
                row.verdict = "SKIP" if target else "INFO"
                rows.append(row)
            else:
                rows.append(compare(label, mine["rate"], per_second, name, other["rate"], target))
    mine, nemo = res.get("ours/float", {}), res.get("nemo/float", {})
    if mine.get("cpu_rate") and nemo.get("cpu_rate"):  # CPU time: steadier on a shared machine
        rows.append(
            compare(
                "python floats, per CPU second",
                mine["cpu_rate"],
                per_second,
                "nemo-automodel 0.7.0",
                nemo["cpu_rate"],
            )  # fmt: skip
        )
    notes = []
    for logger in ("ours", "nemo"):
        base = res.get(f"{logger}/float", {}).get("rate")
        for kind in ("float-fsync", "float-flush100"):
            rate = res.get(f"{logger}/{kind}", {}).get("rate")
            if not (base and rate):
                continue
            if logger == "ours":
                rows.append(
                    compare(
                        f"durability cost: {KINDS[kind][0]}",
                        rate,
                        per_second,
                        "trainlaunch, no fsync",
                        base,
                    )
                )
            else:
                notes.append(
                    f"nemo durability cost: {KINDS[kind][0]} runs at "
                    f"{rate / base:.2f} x its no-fsync rate"
                )
    notes[:0] = [
        "records/s, median of the runs; samples are built before the timed loop "
        "unless the row says otherwise; ratio = trainlaunch / peer (higher is better)",
        "durability rows: ratio = rate with the guarantee / rate without it "
        "(same logger, python floats)",
    ]
    return [Table("6. MetricLogger records/s", rows, notes)]
