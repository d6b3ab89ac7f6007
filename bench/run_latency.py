"""2. `trainlaunch run` (detached) until the handle is printed, against our own `--help`.

The timed span is what ``h=$(trainlaunch run ...)`` waits for: start to exit of the CLI, which
exits right after printing the handle. Between runs the bench waits (untimed) for the app to
end so that no supervisor competes for the CPU with the next measurement. For scale, the
blocking forms are shown too: ``run --wait`` and TorchX's ``run -s local_cwd`` (TorchX always
blocks on local apps).
"""

from __future__ import annotations

import functools
import tempfile

from bench.context import Context
from bench.harness import (
    BenchError,
    Sample,
    Table,
    Target,
    cmd_case,
    compare,
    cpu_note,
    measure,
    run_cmd,
    seconds,
)

NAME = "run"
GOAL = Target("<=", 1.5)  # issue 26: run (detached) to the handle <= 1.5 x --help


def run(ctx: Context) -> list[Table]:
    """Detached run vs --help; --wait vs torchx run, round-robin."""
    env, cwd = ctx.env(), ctx.scratch
    echo = ["utils.echo", "--msg", "hi"]

    def detached(tl: list[str] = ctx.tl, env: dict[str, str] = env) -> Sample:
        with tempfile.TemporaryFile() as out:
            sample = run_cmd([*tl, "run", *echo], env=env, cwd=cwd, stdout=out)
            out.seek(0)
            handle = out.read().decode().strip()
        if not handle.startswith("local://"):
            raise BenchError(f"trainlaunch run printed {handle!r}, not a handle")
        ctx.wait_terminal(handle)  # untimed: let it finish before the next case
        return sample

    cases = {
        "run (detached)": detached,
        "--help": cmd_case([*ctx.tl, "--help"], env=env, cwd=cwd),
        "run --wait": cmd_case([*ctx.tl, "run", "--wait", *echo], env=env, cwd=cwd),
    }
    if ctx.peers.torchx is not None:
        cases["torchx run -s local_cwd"] = cmd_case(
            [str(ctx.peers.torchx), "run", "-s", "local_cwd", "utils.echo", "--msg", "hi"],
            env=ctx.peer_env(),
            cwd=cwd,
        )
    for label in ctx.variants:  # --before: both trees, interleaved with the rest
        venv = ctx.variant_env(label)
        cases[f"{label}: run (detached)"] = functools.partial(detached, ctx.variant_tl(label), venv)
        cases[f"{label}: --help"] = cmd_case([*ctx.variant_tl(label), "--help"], env=venv, cwd=cwd)
    stats = measure(cases, repeats=ctx.pick(7, 3, 1) * (3 if ctx.variants else 1), warmup=1)
    rows = [
        compare(
            "run (detached) -> handle",
            stats["run (detached)"].wall,
            seconds,
            "trainlaunch --help",
            stats["--help"].wall,
            GOAL,
        )
    ]
    for label in ctx.variants:
        for what, clock in (("wall", "wall"), ("cpu", "cpu")):
            rows.append(
                compare(
                    f"{label}: run (detached) -> handle, {what}",
                    getattr(stats[f"{label}: run (detached)"], clock),
                    seconds,
                    f"{label}: --help",
                    getattr(stats[f"{label}: --help"], clock),
                    GOAL if label == "after" else None,
                )
            )
    if ctx.variants:
        for what, clock in (("wall", "wall"), ("cpu", "cpu")):
            rows.append(
                compare(
                    f"run (detached) -> handle, {what}: after vs before",
                    getattr(stats["after: run (detached)"], clock),
                    seconds,
                    "before",
                    getattr(stats["before: run (detached)"], clock),
                )
            )
    if "torchx run -s local_cwd" in stats:
        rows.append(
            compare(
                "run --wait utils.echo",
                stats["run --wait"].wall,
                seconds,
                "torchx run -s local_cwd",
                stats["torchx run -s local_cwd"].wall,
            )
        )
    else:
        rows.append(compare("run --wait utils.echo", stats["run --wait"].wall, seconds))
    runs = stats["--help"].runs
    return [
        Table(
            "2. run until the handle is printed",
            rows,
            [f"wall time, median of {runs} interleaved runs; CLI start to exit", cpu_note(stats)],
        )
    ]
