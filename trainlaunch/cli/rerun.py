"""`trainlaunch rerun HANDLE [OPTIONS] [ARGS]...`."""

from __future__ import annotations

from typing import Any

import click

from trainlaunch.cli import output


@click.command(
    "rerun", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option("--cfg", "cfgs", multiple=True, metavar="K=V,...", help="Override scheduler options.")
@click.option("--seed", type=int, default=None, help="Override the seed.")
@click.option("--dryrun", is_flag=True, help="Print what would be submitted; submit nothing.")
@output.json_option
@click.argument("handle")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(
    cfgs: tuple[str, ...],
    seed: int | None,
    dryrun: bool,
    as_json: bool,
    handle: str,
    args: tuple[str, ...],
) -> None:
    """Submit the app HANDLE again: same component and arguments, scheduler, options,
    seed and code snapshot; print the new handle.

    ARGS, if given, replace the component's arguments; --seed and --cfg override. The new
    app's `describe` names the app it was rerun from.
    """
    from trainlaunch.handles import parse_app_handle
    from trainlaunch.resolver import HelpRequested
    from trainlaunch.runner import get_runner

    handle = str(parse_app_handle(handle))
    with get_runner() as runner:
        opts = runner.scheduler_run_opts(parse_app_handle(handle).scheduler)
        cfg: dict[str, Any] = {}
        for text in cfgs:
            cfg.update(opts.cfg_from_str(text, parse_app_handle(handle).scheduler))
        try:
            info = runner.dryrun_rerun(handle, list(args) or None, cfg, seed)
        except HelpRequested as h:  # `rerun H --help`: the component's help, as `run` shows it
            output.emit(h.text)
            return
        if dryrun:
            output.emit(str(info))
            return
        new = runner.schedule(info)
    if as_json:
        output.emit_json({"handle": new, "rerun_of": handle, "scheduler": info.scheduler})
    else:
        output.emit(new)
