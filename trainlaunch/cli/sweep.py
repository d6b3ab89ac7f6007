"""`trainlaunch sweep [--param ...]... [--seeds ...] COMPONENT [ARGS]...` (docs/sweeps.md)."""

from __future__ import annotations

from typing import Any

import click

from trainlaunch.cli import output
from trainlaunch.errors import UsageError


@click.command("sweep", context_settings={"allow_interspersed_args": False})
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=V1,V2|NAME=LO:HI[:log]",
    help="A swept parameter, used as {NAME} in ARGS; repeatable (grid = all combinations).",
)
@click.option("--seeds", default=None, metavar="S1,S2,...", help="Run every point per seed.")
@click.option("--random", "random_n", type=int, default=None, metavar="N", help="N random points.")
@click.option(
    "--max-parallel",
    type=int,
    default=None,
    metavar="K",
    help="At most K apps run at once (local; slurm: a job array's %K; kubernetes: one Indexed "
    "Job's parallelism); the rest wait as PENDING.",
)
@click.option("-s", "--scheduler", default=None, help="Backend: local (default), slurm, ...")
@click.option("--cfg", "cfgs", multiple=True, metavar="K=V,...", help="Scheduler options.")
@click.option(
    "--snapshot/--no-snapshot",
    default=None,
    help="Copy the code into each point's directory and run it from there (default: on for "
    "slurm, and on local with --max-parallel, whose points may start later; docs/sweeps.md).",
)
@click.option("--dryrun", is_flag=True, help="List the points and what each would submit.")
@output.json_option
@click.argument("component")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
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
    """
    from trainlaunch import sweep_runs, sweeps
    from trainlaunch.config import load_config
    from trainlaunch.runner import get_runner
    from trainlaunch.settings import RankSettings

    parsed = [sweeps.parse_param(p) for p in params]
    points = sweeps.expand(parsed, sweeps.parse_seeds(seeds), random_n, rng_seed=_rng_seed())
    config = load_config()
    sched = scheduler or config.default_scheduler()
    rank_settings = RankSettings(**config.run_settings({}))
    runner = get_runner(component_defaults={component: config.component_defaults(component)})
    with runner:
        opts = runner.scheduler_run_opts(sched)
        base = config.scheduler_cfg(sched)
        cfg: dict[str, Any] = dict(opts.resolve(base, sched)) if base else {}
        cfg = {k: v for k, v in cfg.items() if v is not None}
        explicit = "snapshot" in (base or {})
        for text in cfgs:
            given = opts.cfg_from_str(text, sched)
            explicit = explicit or "snapshot" in given
            cfg.update(given)
        if snapshot is not None:
            if "snapshot" not in opts:
                raise UsageError(f"the {sched} backend does not take code snapshots")
            cfg["snapshot"] = "on" if snapshot else "off"
        elif sched == "local" and max_parallel is not None and not explicit:
            cfg["snapshot"] = "on"  # queued points must run the code of the submission
        plan = sweep_runs.plan_sweep(
            runner, component, args, points, sched, cfg, rank_settings, max_parallel
        )
        if max_parallel is not None and plan.scheduler != "local" and plan.array is None:
            raise UsageError(
                f"--max-parallel on {plan.scheduler}: "
                + (
                    f"the sweep cannot be one job array: {plan.array_note}"
                    if plan.array_note
                    else "enforced on local, slurm (job arrays) and kubernetes only"
                ),
                hint="drop --max-parallel (one job per point) or sweep what keeps the "
                "resources equal; docs/sweeps.md",
            )
        if plan.array_note:
            output.narrate(
                f"note: one {plan.scheduler} job per point, not a job array: {plan.array_note}"
            )
        if dryrun:
            _print_dryrun(plan, as_json)
            return
        handle = sweep_runs.launch(runner, plan, None if as_json else _print_handle)
    if as_json:
        record = sweep_runs.read_sweep(plan.sweep_id)
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
    from trainlaunch import sweeps

    if as_json:
        output.emit_json(
            {
                "sweep": plan.sweep_id,
                "scheduler": plan.scheduler,
                "points": [
                    {**p.to_dict(), "app_id": i.app_id, "request": str(i)}
                    for p, i in zip(plan.points, plan.infos, strict=True)
                ],
                # the one request submitted when the points are a job array (element i = point i)
                "array": None if plan.array is None else str(plan.array),
            }
        )
        return
    if plan.array is not None:  # element i of the array is point i
        points = [f"# element {p.index}: {sweeps.point_label(p)}" for p in plan.points]
        output.emit("\n".join(points) + f"\n{plan.array}\n")
        return
    for point, info in zip(plan.points, plan.infos, strict=True):
        output.emit(f"# point {point.index}: {sweeps.point_label(point)}\n{info}\n")
