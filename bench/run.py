#!/usr/bin/env python3
"""Run the benchmark suite: ``python bench/run.py [--quick] [--only NAME[,NAME...]]``.

Sets up the peers once (a venv with torchx 0.7.0 + torch 2.13.0 and NeMo Automodel's logger,
in ~/.cache/trainlaunch-bench, outside the repository), then prints one table per benchmark
with the ratio against each peer measured in the same run. bench/README.md explains each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `python bench/run.py` works

from bench import (  # noqa: E402
    c10d_scale,
    cli_latency,
    launch,
    logs_throughput,
    many_ranks,
    memory,
    metrics_logger,
    preflight,
    run_latency,
    scaling,
    store_scale,
    supervisor_cost,
    sweep_queue,
    variants,
)
from bench.context import Context  # noqa: E402
from bench.harness import Row, Table  # noqa: E402
from bench.peers import Peers, cache_dir, ensure_ours_venv, find_peers, no_peers  # noqa: E402

BENCHMARKS: dict[str, ModuleType] = {
    m.NAME: m
    for m in (
        cli_latency,
        run_latency,
        launch,
        store_scale,
        logs_throughput,
        metrics_logger,
        memory,
        supervisor_cost,
        scaling,
        c10d_scale,
        preflight,
        many_ranks,
        sweep_queue,
    )
}
SMOKE = ("cli", "store", "logs", "metrics", "supervisor", "c10d")  # the tiny run of the test suite


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(
        prog="python bench/run.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="fewer repeats and sizes (~3 min)")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, no peers: checks that the harness works (test suite)",
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME[,NAME]",
        help=f"run only these benchmarks: {', '.join(BENCHMARKS)}",
    )
    p.add_argument(
        "--no-setup",
        action="store_true",
        help="do not install the peers; use them only if already cached",
    )
    p.add_argument("--no-peers", action="store_true", help="measure trainlaunch alone")
    p.add_argument(
        "--ours",
        choices=("venv", "here"),
        default=None,
        help="venv (default): the working tree installed as a wheel into a clean "
        "venv in the bench cache; here: the trainlaunch of this interpreter "
        "(the default of --smoke)",
    )
    p.add_argument(
        "--before",
        metavar="REV",
        help="also measure the tree at git REV beside the working tree, interleaved (benchmarks "
        "run and launch add rows after vs before; bench/variants.py)",
    )
    p.add_argument("--json", metavar="FILE", help="also write every row to FILE as JSON")
    p.add_argument(
        "--plot", metavar="DIR", help="also write a PNG chart of every scaling series into DIR"
    )
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    p.add_argument("--strict", action="store_true", help="exit 1 if any target is missed")
    return p.parse_args(argv)


def selected(args: argparse.Namespace) -> list[str]:
    """Benchmark names to run, in suite order."""
    names = [n.strip() for group in args.only for n in group.split(",") if n.strip()]
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        raise SystemExit(
            f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}"
        )
    default = SMOKE if args.smoke else tuple(BENCHMARKS)
    return [n for n in BENCHMARKS if n in (names or default)]


def header(mode: str, peers: Peers, python: Path, how: str) -> str:
    """What this run measured with."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        f"trainlaunch bench ({mode}) - python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, load average {load}",
        f"  trainlaunch: {python.parent / 'trainlaunch'} ({how})",
        f"  peers cache: {cache_dir()}",
    ]
    for name, path in (
        ("torchx", peers.torchx),
        ("torchrun", peers.torchrun),
        ("nemo logger", peers.nemo_logger),
    ):
        lines.append(f"  {name}: {path if path else 'missing: ' + peers.why(name.split()[0])}")
    return "\n".join(lines)


def error_table(name: str, exc: BaseException) -> Table:
    """A benchmark that crashed still gets a table, with the reason."""
    lines = str(exc).strip().splitlines() or [""]
    why = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1].strip()}"
    row = Row(f"{name}: error", "-", "-", f"{type(exc).__name__}: {why[:300]}")
    row.verdict = "ERROR"
    return Table(f"{name} (failed)", [row])


def plot_series(tables: list[Table], directory: Path) -> list[Path]:
    """One log-log PNG per series (cost against size; several lines where a series has them,
    ours and a peer's); needs matplotlib (the dev extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for table in tables:
        for title, points in table.series.items():
            lines = points if isinstance(points, dict) else {"": points}
            if max((len(p) for p in lines.values()), default=0) < 2:
                continue
            fig, ax = plt.subplots(figsize=(6, 4))
            for label, line in lines.items():
                if line:
                    xs, ys = zip(*line, strict=True)
                    ax.plot(xs, ys, marker="o", label=label or None)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(title)
            ax.grid(True, which="both", alpha=0.3)
            if len(lines) > 1:
                ax.legend()
            fig.tight_layout()
            slug = "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")
            path = directory / f"{slug}.png"
            fig.savefig(path)
            plt.close(fig)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """Set up, run the selected benchmarks, print the tables and a summary."""
    args = parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    names = selected(args)
    started = time.monotonic()
    python, how = Path(sys.executable), "this interpreter"
    if (args.ours or ("here" if args.smoke else "venv")) == "venv":
        root, why = ensure_ours_venv(cache_dir(), REPO, install=not args.no_setup)
        if root is None:
            print(
                f"warning: {why}; measuring this interpreter's trainlaunch instead", file=sys.stderr
            )
        else:
            python, how = root / "bin" / "python", "working tree installed as a wheel"
    if args.smoke or args.no_peers:
        peers = no_peers("--smoke" if args.smoke else "--no-peers")
    else:
        peers = find_peers(python, install=not args.no_setup)
    print(header(mode, peers, python, how), flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="trainlaunch-bench-"))
    ctx = Context(mode=mode, scratch=scratch, peers=peers, python=python)
    if args.before:
        ctx.variants = variants.prepare(python, REPO, args.before, cache_dir())
        sha = (ctx.variants["before"] / "REV").read_text()
        print(f"  before: {args.before} = {sha} (in {ctx.variants['before']})")
        print(f"  after: the working tree (in {ctx.variants['after']})", flush=True)
    tables: list[Table] = []
    errors = 0
    try:
        for name in names:
            t0 = time.monotonic()
            try:
                new = BENCHMARKS[name].run(ctx)
            except Exception as e:  # noqa: BLE001 - report it and go on with the others
                errors += 1
                traceback.print_exc(file=sys.stderr)
                new = [error_table(name, e)]
            for table in new:
                table.notes.append(f"took {time.monotonic() - t0:.0f} s")
                print("\n" + table.render(), flush=True)
            tables += new
    finally:
        if args.keep:
            print(f"\nscratch kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    rows = [r for t in tables for r in t.rows]
    counts = {v: sum(r.verdict == v for r in rows) for v in ("PASS", "MISS", "SKIP", "INFO")}
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\nsummary: {', '.join(f'{k} {v}' for k, v in counts.items())}, errors {errors}; "
        f"{time.monotonic() - started:.0f} s; load average now {load}"
    )
    for t in tables:
        for r in t.rows:
            if r.verdict == "MISS":
                print(
                    f"  MISS  {t.title}: {r.metric}: {r.ours} vs {r.peer} {r.peer_value} "
                    f"(ratio {r.ratio if r.ratio is None else f'{r.ratio:.3g}'}, "
                    f"target {r.target})"
                )
    if args.plot:
        for path in plot_series(tables, Path(args.plot)):
            print(f"chart: {path}")
    if args.json:
        doc = [
            {
                "table": t.title,
                "metric": r.metric,
                "trainlaunch": r.ours_raw,
                "peer": r.peer,
                "peer_value": r.peer_raw,
                "ratio": r.ratio,
                "target": str(r.target) if r.target else None,
                "result": r.verdict,
            }
            for t in tables
            for r in t.rows
        ]
        Path(args.json).write_text(json.dumps({"mode": mode, "rows": doc}, indent=1))
    if errors or (args.strict and counts["MISS"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
