"""`trainlaunch sweep [--param ...]... [--seeds ...] COMPONENT [ARGS]...` (docs/sweeps.md)."""

from __future__ import annotations

from typing import Any

import click

from trainlaunch.cli import argv, output
from trainlaunch.cli.backends import (
    LazyHelpOption,
    max_parallel_keepers,
    scheduler_help,
    scheduler_option,
    snapshot_defaults,
)


@click.command(
    "sweep", cls=argv.ComponentCommand, context_settings={"allow_interspersed_args": False}
)
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=V1,V2|NAME=LO:HI[:log|:int]",
    help="A swept parameter, used as {NAME} in ARGS; repeatable (grid = all combinations).",
)
@click.option("--seeds", default=None, metavar="S1,S2,...", help="Run every point per seed.")
@click.option("--random", "random_n", type=int, default=None, metavar="N", help="N random points.")
@click.option(
    "--max-parallel",
    cls=LazyHelpOption,
    type=int,
    default=None,
    metavar="K",
    lazy_help=lambda: (
        f"At most K apps run at once ({max_parallel_keepers()}); the rest wait as PENDING."
    ),
)
@scheduler_option(scheduler_help)
@click.option("--cfg", "cfgs", multiple=True, metavar="K=V,...", help="Scheduler options.")
@click.option(
    "--snapshot/--no-snapshot",
    cls=LazyHelpOption,
    default=None,
    lazy_help=lambda: (
        "Copy the code into each point's directory and run it from there "
        f"(default: {snapshot_defaults()}; on with --max-parallel, whose points may start "
        "later; docs/sweeps.md)."
    ),
)
@click.option("--dryrun", is_flag=True, help="List the points and what each would submit.")
@output.json_option
@click.argument("component")
@click.argument(
    "args", nargs=-1, type=click.UNPROCESSED, shell_complete=argv.complete_component_args
)
def command(
    params: tuple[str, ...],
    seeds: str | None,
    random_n: int | None,
    max_parallel: int | None,
    scheduler: str | None,
    cfgs: tuple[str, ...],
    snapshot: bool | None,
    dryrun: bool,
    as_json: bool,
    component: str,
    args: tuple[str, ...],
) -> None:
    """Run COMPONENT once per point of a grid (or random sample); print the sweep's handle.

    `{NAME}` in ARGS is replaced by each point's value; `{{`/`}}` are literal braces.
    LO:HI:int draws whole numbers (`--param layers=2:8:int`).

    \b
    Example:
      trainlaunch sweep --param lr=1e-4:1e-1:log --random 8 --seeds 1,2 dist.ddp train.py --lr {lr}
    """
    from trainlaunch.config import load_config
    from trainlaunch.runner import CfgRequest, get_runner
    from trainlaunch.settings import RankSettings
    from trainlaunch.sweeps import grammar as sweeps
    from trainlaunch.sweeps.record import read_sweep

    parsed = [sweeps.parse_param(p) for p in params]
    points = sweeps.expand(parsed, sweeps.parse_seeds(seeds), random_n, rng_seed=_rng_seed())
    config = load_config()
    sched = scheduler or config.default_scheduler()
    rank_settings = RankSettings(**config.run_settings({}))
    runner = get_runner(component_defaults={component: config.component_defaults(component)})
    with runner:
        # queued points (--max-parallel) run a snapshot of the submission by default
        request = CfgRequest(texts=cfgs, snapshot=snapshot, queued=max_parallel is not None)
        cfg = runner.scheduler_cfg(
            sched, request, base=config.scheduler_cfg(sched, runner.scheduler_run_opts(sched))
        )
        plan = runner.dryrun_sweep(
            component, args, points, sched, cfg, rank_settings, max_parallel
        )  # a backend that cannot keep --max-parallel: a usage error saying why
        if plan.array_note:
            output.narrate(
                f"note: one {plan.scheduler} job per point, not a job array: {plan.array_note}"
            )
        if dryrun:
            _print_dryrun(plan, as_json)
            return
        from trainlaunch.cli.boundary import interrupts_held, raise_on_sigterm

        raise_on_sigterm()  # SIGTERM ends the submission as Ctrl-C does (exit 130)
        # a point's submission and its line in the sweep's record are never cut apart
        handle = runner.schedule_sweep(plan, None if as_json else _print_handle, interrupts_held)
    if as_json:
        record = read_sweep(plan.sweep_id)
        output.emit_json({"handle": handle, "sweep": plan.sweep_id, "points": record["points"]})
    else:
        output.narrate(f"{len(plan.points)} apps; `trainlaunch list --sweep {plan.sweep_id}`")


def _print_handle(handle: str) -> None:
    """The handle goes out before the first submission (a failure half-way still names it)."""
    import sys

    output.emit(handle)
    sys.stdout.flush()


def _rng_seed() -> int:
    import secrets

    return secrets.randbelow(2**31)


def _print_dryrun(plan: Any, as_json: bool) -> None:
    from trainlaunch.cli.dryrun import request_text  # secrets masked, as `run --dryrun`
    from trainlaunch.sweeps import grammar as sweeps

    array = None if plan.array is None else request_text(plan.array, False, plan.infos)
    if as_json:
        output.emit_json(
            {
                "sweep": plan.sweep_id,
                "scheduler": plan.scheduler,
                "points": [
                    {**p.to_dict(), "app_id": i.app_id, "request": request_text(i, False)}
                    for p, i in zip(plan.points, plan.infos, strict=True)
                ],
                # the one request submitted when the points are a job array (element i = point i)
                "array": array,
            }
        )
        return
    if array is not None:  # element i of the array is point i
        points = [f"# element {p.index}: {sweeps.point_label(p)}" for p in plan.points]
        output.emit("\n".join(points) + f"\n{array}\n")
        return
    for point, info in zip(plan.points, plan.infos, strict=True):
        text = request_text(info, False)
        output.emit(f"# point {point.index}: {sweeps.point_label(point)}\n{text}\n")
