"""`trainlaunch run [OPTIONS] COMPONENT [ARGS]...`."""

from __future__ import annotations

from typing import Any

import click

from trainlaunch.cli import argv, output


@click.command("run", context_settings={"allow_interspersed_args": False})
@click.option(
    "-s", "--scheduler", default=None, help="Backend: local (default), slurm, kubernetes."
)
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
    help="A hang: no output, metrics or heartbeat from any rank this long (cfg hang_timeout).",
)
@click.option(
    "--on-hang",
    type=click.Choice(["none", "stop", "restart"]),
    default=None,
    help="After a hang: report only (none), stop, or restart the app (cfg on_hang).",
)
@click.option(
    "--snapshot/--no-snapshot",
    default=None,
    help="Copy the code into the app's directory and run it from there (default: on for "
    "slurm, off for local; see docs/preemption.md).",
)
@output.json_option
@click.argument("component", shell_complete=argv.complete_component)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(
    scheduler: str | None,
    cfgs: tuple[str, ...],
    dryrun: bool,
    wait_: bool,
    log: bool,
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
    as_json: bool,
    component: str,
    args: tuple[str, ...],
) -> None:
    """Run COMPONENT with ARGS; print its handle on stdout and return.

    COMPONENT is an installed entry point, a builtin like `utils.echo` or `dist.ddp`,
    `pkg.mod.fn`, `pkg.mod:fn` or `path/file.py:fn`; `trainlaunch run COMPONENT --help`
    shows its arguments. With --wait or --log, Ctrl-C (or SIGTERM, or SIGHUP from a closed
    terminal) stops the app; plain `run` then `wait` never does.
    """
    from trainlaunch.config import load_config
    from trainlaunch.errors import UsageError
    from trainlaunch.resolver import HelpRequested
    from trainlaunch.runner import get_runner
    from trainlaunch.settings import RankSettings

    config = load_config()
    sched = scheduler or config.default_scheduler()
    cli_settings = {
        "seed": seed,
        "export_strategy": export_strategy,
        "export_rank": export_rank,
        "export_sample_rate": export_sample_rate,
        "metrics_path": metrics_path,
    }
    rank_settings = RankSettings(**config.run_settings(cli_settings))
    runner = get_runner(component_defaults={component: config.component_defaults(component)})
    with runner:
        opts = runner.scheduler_run_opts(sched)
        cfg: dict[str, Any] = (
            dict(opts.resolve(config.scheduler_cfg(sched), sched))
            if config.scheduler_cfg(sched)
            else {}
        )
        cfg = {k: v for k, v in cfg.items() if v is not None}
        for text in cfgs:
            cfg.update(opts.cfg_from_str(text, sched))
        hang = {"hang_timeout": hang_timeout, "on_hang": on_hang}  # docs/hangs.md
        cfg.update({k: v for k, v in hang.items() if v is not None})
        if snapshot is not None:
            if "snapshot" not in opts:
                raise UsageError(f"the {sched} backend does not take code snapshots")
            cfg["snapshot"] = "on" if snapshot else "off"
        try:
            info = runner.dryrun_component(component, list(args), sched, cfg, rank_settings)
        except HelpRequested as h:
            output.emit(h.text)
            return
        if dryrun:
            from trainlaunch.cli.dryrun import print_dryrun

            print_dryrun(info, as_json, show_secrets)
            return
        if wait_ or log:
            _run_and_wait(runner, info, log, as_json, app_exit_code)
            return
        handle = runner.schedule(info)
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


def _run_and_wait(runner: Any, info: Any, log: bool, as_json: bool, app_exit_code: bool) -> None:
    """Submit, print the handle, wait; an interrupt at any point after submission stops the app."""
    from trainlaunch.cli.boundary import interrupts_held
    from trainlaunch.cli.waiting import finish, wait_for

    handle = None
    try:
        with interrupts_held():  # from here on SIGTERM/SIGHUP/SIGINT are KeyboardInterrupt
            handle = runner.schedule(info)  # a signal meanwhile is raised once handle is set
        if not as_json:
            output.emit(handle)
            sys_stdout_flush()
        if log:
            from trainlaunch.cli.logs import stream_all

            stream_all(runner, handle, follow=True)
            resp = wait_for(runner, handle, None, live=False)
        else:
            resp = wait_for(runner, handle, None, live=output.stderr_is_tty() and not as_json)
    except KeyboardInterrupt:
        if handle is None:
            raise  # interrupted before the app existed: nothing to stop
        with interrupts_held(deliver=False):  # a second Ctrl-C must not cut the stop short
            output.narrate(f"interrupted: stopping {handle} ...")
            runner.cancel(handle)
            output.narrate(f"{handle} stopped")
        raise
    finish(handle, resp, as_json, app_exit_code)
