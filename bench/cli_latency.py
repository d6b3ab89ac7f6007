"""1. CLI latency: our everyday commands against `torchx status`, TorchX, torchrun, import torch.

`torchx status` is measured on a ``local_cwd`` handle that no process holds: TorchX keeps local
apps only in the memory of the process that ran them, so from a second process every local
handle is unknown. That run is the cheapest thing `torchx status` can do (parse arguments,
build the runner, load the scheduler, look the app up, print "does not exist"), i.e. TorchX's
floor for a status query; a ``slurm://`` handle costs the same plus an ``squeue`` call.
"""

from __future__ import annotations

import sys

from bench.context import Context
from bench.harness import Row, Table, Target, cmd_case, compare, cpu_note, measure, seconds, skipped

NAME = "cli"
UNKNOWN_TORCHX = "local_cwd://torchx/bench-unknown-app"


def run(ctx: Context) -> list[Table]:
    """Measure every command round-robin; compare each of ours with the peers."""
    handle = ctx.finished_app()
    env, cwd = ctx.env(), ctx.scratch
    ours = {
        "--help": [*ctx.tl, "--help"],
        "status --json": [*ctx.tl, "status", "--json", handle],
        "list": [*ctx.tl, "list"],
        "logs (finished app)": [*ctx.tl, "logs", handle],
        "builtins": [*ctx.tl, "builtins"],
    }
    if ctx.smoke:
        ours = {k: v for k, v in ours.items() if k in ("--help", "status --json")}
    peers: dict[str, list[str]] = {}
    p = ctx.peers
    if p.torchx is not None:
        peers["torchx --help"] = [str(p.torchx), "--help"]
        peers["torchx status"] = [str(p.torchx), "status", UNKNOWN_TORCHX]
        peers["torchx builtins"] = [str(p.torchx), "builtins"]
    if p.torchrun is not None:
        peers["torchrun --help"] = [str(p.torchrun), "--help"]
    if p.torch_python is not None:
        peers["import torch"] = [str(p.torch_python), "-c", "import torch"]
    peers["python -c pass (ours)"] = [str(ctx.python), "-c", "pass"]
    if p.torchx_python is not None:
        peers["python -c pass (peers venv)"] = [str(p.torchx_python), "-c", "pass"]
    cases = {f"trainlaunch {k}": cmd_case(v, env=env, cwd=cwd) for k, v in ours.items()}
    for name, argv in peers.items():
        ok = (0, 1) if name == "torchx status" else (0,)  # unknown handle: exit 1 by design
        cases[name] = cmd_case(argv, env=env, cwd=cwd, ok=ok)
    stats = measure(cases, repeats=ctx.pick(7, 3, 1), warmup=ctx.pick(1, 1, 0))

    def peer(name: str) -> float | None:
        return stats[name].wall if name in stats else None

    rows: list[Row] = []
    for key in ours:
        mine = stats[f"trainlaunch {key}"].wall
        for pname, target, why in (
            ("torchx status", Target("<=", 1.0), "torchx"),
            ("import torch", Target("<=", 0.1), "torch"),
        ):
            if pname in stats:
                rows.append(compare(key, mine, seconds, pname, peer(pname), target))
            else:
                rows.append(skipped(key, p.why(why), target, pname, seconds(mine)))
    for key, pname in (
        ("--help", "torchx --help"),
        ("builtins", "torchx builtins"),
        ("--help", "torchrun --help"),
        ("--help", "python -c pass (ours)"),
        ("--help", "python -c pass (peers venv)"),
    ):
        if pname in stats:
            rows.append(compare(key, stats[f"trainlaunch {key}"].wall, seconds, pname, peer(pname)))
    runs = next(iter(stats.values())).runs
    notes = [
        f"wall time, median of {runs} interleaved runs; python {sys.version.split()[0]}",
        f"`torchx status` runs on {UNKNOWN_TORCHX}: TorchX forgets local apps when the "
        "process that ran them exits, so this is its cheapest status query (exit 1)",
        "python -c pass: the interpreter floor of each environment (site-packages .pth "
        "files run at every start: an editable install's finder, sandbox hooks, ...)",
        "ours: status/list/logs read a real finished app in the bench's private store",
        cpu_note(stats),
    ]
    return [Table("1. CLI latency", rows, notes)]
