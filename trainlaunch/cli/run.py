"""`trainlaunch run [OPTIONS] COMPONENT [ARGS]...`."""

from __future__ import annotations

from typing import Any

import click

from trainlaunch.cli import argv, output
from trainlaunch.cli.backends import (
    LazyHelpOption,
    scheduler_help,
    scheduler_option,
    snapshot_defaults,
)


@click.command(
    "run", cls=argv.ComponentCommand, context_settings={"allow_interspersed_args": False}
)
@scheduler_option(scheduler_help)
@click.option(
    "--cfg",
    "cfgs",
    multiple=True,
    metavar="K=V,...",
    help="Scheduler options (see `trainlaunch runopts`); repeatable.",
)
@click.option(
    "--dryrun", is_flag=True, help="Print exactly what would be submitted; submit nothing."
)
@click.option(
    "--wait", "wait_", is_flag=True, help="Wait for the app to end (exit code as `wait`)."
)
@click.option("--log", is_flag=True, help="Stream every replica's logs until the app ends.")
@click.option(
    "--merge/--no-merge",
    default=None,
    help="With --log: a line several ranks wrote, once with its ranks (default: several "
    "ranks); docs/logs.md.",
)
@click.option("--seed", type=int, default=None, help="Seed injected into every rank.")
@click.option(
    "--export-strategy",
    default=None,
    help="Which ranks export telemetry: all_ranks, single_rank, sampled, "
    "first_rank_per_node, or a qualified custom name (pkg:name).",
)
@click.option("--export-rank", type=int, default=None, help="Rank for single_rank (-1 = last).")
@click.option(
    "--export-sample-rate",
    type=float,
    default=None,
    help="Fraction of ranks for sampled, in [0, 1].",
)
@click.option(
    "--metrics-path",
    default=None,
    help="Where ranks write metrics; may contain ${app_id} and {rank}.",
)
@click.option("--show-secrets", is_flag=True, help="Do not mask secret-looking env in --dryrun.")
@click.option(
    "--app-exit-code",
    is_flag=True,
    help="With --wait/--log: exit with the failing replica's exit code instead of 1.",
)
@click.option(
    "--hang-timeout",
    type=float,
    default=None,
    metavar="SECONDS",
    help=(
        "A hang: no output, metrics or heartbeat from any rank this long (cfg hang_timeout). "
        "Until its first line a rank is starting and its CPU time counts too (import torch); "
        "after it, CPU time does not (call heartbeat() in long silent loops). docs/hangs.md"
    ),
)
@click.option(
    "--on-hang",
    default=None,
    metavar="none|stop|restart",
    help="After a hang: report only (none), stop, or restart the app (cfg on_hang; checked "
    "by the backend's options, `trainlaunch runopts`).",
)
@click.option(
    "--snapshot/--no-snapshot",
    cls=LazyHelpOption,
    default=None,
    lazy_help=lambda: (
        "Copy the code into the app's directory and run it from there (default: "
        f"{snapshot_defaults()}; see docs/preemption.md)."
    ),
)
@click.option(
    "--preflight/--no-preflight",
    default=None,
    help="Before the ranks start, check that every node of a dist.ddp app can run it "
    "(cfg preflight; docs/preflight.md).",
)
@output.json_option
@click.argument("component", shell_complete=argv.complete_component)
@click.argument(
    "args", nargs=-1, type=click.UNPROCESSED, shell_complete=argv.complete_component_args
)
def command(
    scheduler: str | None,
    cfgs: tuple[str, ...],
    dryrun: bool,
    wait_: bool,
    log: bool,
    merge: bool | None,
    seed: int | None,
    export_strategy: str | None,
    export_rank: int | None,
    export_sample_rate: float | None,
    metrics_path: str | None,
    show_secrets: bool,
    app_exit_code: bool,
    hang_timeout: float | None,
    on_hang: str | None,
    snapshot: bool | None,
    preflight: bool | None,
    as_json: bool,
    component: str,
    args: tuple[str, ...],
) -> None:
    """Run COMPONENT with ARGS; print its handle on stdout and return.

    COMPONENT is an installed entry point, a builtin like `utils.echo` or `dist.ddp`,
    `pkg.mod.fn`, `pkg.mod:fn` or `path/file.py:fn`; `trainlaunch run COMPONENT --help`
    shows its arguments. With --wait or --log, Ctrl-C (or SIGTERM, or SIGHUP from a closed
    terminal) stops the app (Ctrl-C: the ranks get SIGINT first, as from torchrun); plain
    `run` then `wait` never does.

    \b
    Example:
      trainlaunch run --wait dist.ddp --nproc-per-node 2 train.py --lr 0.1
    """
    from trainlaunch.config import load_config
    from trainlaunch.runner import CfgRequest, get_runner

    config = load_config()
    sched = scheduler or config.default_scheduler()
    runner = get_runner(component_defaults={component: config.component_defaults(component)})
    with runner:
        if not dryrun:  # the local backend starts the app's supervisor meanwhile (launch.py)
            runner.warm_up(sched)
        from trainlaunch.errors import UsageError
        from trainlaunch.resolver import HelpRequested
        from trainlaunch.settings import RankSettings

        cli_settings = {
            "seed": seed,
            "export_strategy": export_strategy,
            "export_rank": export_rank,
            "export_sample_rate": export_sample_rate,
            "metrics_path": metrics_path,
        }
        rank_settings = RankSettings(**config.run_settings(cli_settings))
        request = CfgRequest(
            texts=cfgs,
            snapshot=snapshot,
            hang_timeout=hang_timeout,
            on_hang=on_hang,
            preflight=preflight,
        )
        cfg = runner.scheduler_cfg(
            sched, request, base=config.scheduler_cfg(sched, runner.scheduler_run_opts(sched))
        )
        try:
            info = runner.dryrun_component(component, list(args), sched, cfg, rank_settings)
        except HelpRequested as h:
            output.emit(h.text)
            return
        if preflight and not any(r.node_agent for r in (info.app.roles if info.app else ())):
            raise UsageError(
                f"--preflight checks the nodes of a dist.ddp app; {component} has no node agent",
                hint="run the training with dist.ddp (e.g. trainlaunch run --preflight dist.ddp "
                "-j 2x4 train.py)",
            )
        if dryrun:
            from trainlaunch.cli.dryrun import print_dryrun

            print_dryrun(info, as_json, show_secrets)
            return
        if wait_ or log:
            _run_and_wait(runner, info, log, as_json, app_exit_code, merge)
            return
        handle = _submit(runner, info)
        if as_json and not (wait_ or log):
            output.emit_json(
                {"handle": handle, "app_id": handle.rsplit("/", 1)[1], "scheduler": info.scheduler}
            )
        elif not as_json:
            output.emit(handle)
            sys_stdout_flush()


def sys_stdout_flush() -> None:
    """Make the handle visible at once to a script reading our stdout."""
    import sys

    sys.stdout.flush()


def _submit(runner: Any, info: Any) -> str:
    """Submit; a signal meanwhile is held until the handle is known and then stops the app: an
    interrupted `run` leaves no app running whose handle it never printed (issue 23 #13)."""
    from trainlaunch.cli.boundary import Interrupted, interrupts_held

    handle = None
    try:
        with interrupts_held():
            handle = runner.schedule(info)
    except KeyboardInterrupt:
        if handle is None:
            raise  # interrupted before the app existed: nothing to stop
        with interrupts_held(deliver=False):  # a second signal must not cut the stop short
            runner.cancel(handle)
            output.narrate_or_drop(f"interrupted: {handle} stopped before its handle was printed")
        raise Interrupted from None
    return handle


def _run_and_wait(
    runner: Any, info: Any, log: bool, as_json: bool, app_exit_code: bool, merge: bool | None
) -> None:
    """Submit, print the handle, wait; an interrupt at any point after submission stops the app."""
    from trainlaunch.cli.boundary import Interrupted, interrupts_held
    from trainlaunch.node.interrupts import by_ctrl_c

    handle = None
    try:
        with interrupts_held():  # from here on SIGTERM/SIGHUP/SIGINT are KeyboardInterrupt
            handle = runner.schedule(info)  # a signal meanwhile is raised once handle is set
        if not as_json:
            output.emit(handle)
            sys_stdout_flush()
        # imported while the app starts, not before it (~8 ms); a signal during an import is
        # held until it is done (node/interrupts.py) and then stops the app as anywhere here
        from trainlaunch.cli.logs import AUTO, stream_all
        from trainlaunch.cli.waiting import finish, wait_for

        if log:
            mode = AUTO if merge is None else "exact" if merge else "off"
            stream_all(runner, handle, follow=True, merge=mode)
            resp = wait_for(runner, handle, None, live=False)
        else:
            resp = wait_for(runner, handle, None, live=output.stderr_is_tty() and not as_json)
    except KeyboardInterrupt as e:
        if handle is None:
            raise  # interrupted before the app existed: nothing to stop
        with interrupts_held(deliver=False):  # a second Ctrl-C must not cut the stop short
            # stderr may be gone with the Ctrl-C (`2>&1 | tee`): no write may skip the stop
            output.narrate_or_drop(f"interrupted: stopping {handle} ...")
            # Ctrl-C reaches the ranks as SIGINT, as torchrun's does (SIGTERM/SIGHUP: SIGTERM)
            runner.cancel(handle, interrupt=by_ctrl_c(e))
            output.narrate_or_drop(f"{handle} stopped")
        raise Interrupted from None
    finish(handle, resp, as_json, app_exit_code)
