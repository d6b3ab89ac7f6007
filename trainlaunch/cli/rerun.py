"""`trainlaunch rerun HANDLE [OPTIONS] [ARGS]...`."""

from __future__ import annotations

import click

from trainlaunch.cli import output
from trainlaunch.cli.handles import HANDLE
from trainlaunch.handles import Handle


@click.command(
    "rerun", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option("--cfg", "cfgs", multiple=True, metavar="K=V,...", help="Override scheduler options.")
@click.option("--seed", type=int, default=None, help="Override the seed.")
@click.option("--dryrun", is_flag=True, help="Print what would be submitted; submit nothing.")
@output.json_option
@click.argument("handle", type=HANDLE)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(
    cfgs: tuple[str, ...],
    seed: int | None,
    dryrun: bool,
    as_json: bool,
    handle: Handle,
    args: tuple[str, ...],
) -> None:
    """Submit the app HANDLE again: same component and arguments, scheduler, options,
    seed and code snapshot; print the new handle.

    ARGS, if given, replace the component's arguments; --seed and --cfg override. The new
    app's `describe` names the app it was rerun from.

    \b
    Example:
      trainlaunch rerun --seed 7 local://trainlaunch/train-x7k2m9p4qa
    """
    from trainlaunch.resolver import HelpRequested
    from trainlaunch.runner import CfgRequest, get_runner

    with get_runner() as runner:
        try:
            info = runner.dryrun_rerun(handle, list(args) or None, CfgRequest(texts=cfgs), seed)
        except HelpRequested as h:  # `rerun H --help`: the component's help, as `run` shows it
            output.emit(h.text)
            return
        if dryrun:  # run --dryrun's rule: drawn values as placeholders, secrets masked
            from trainlaunch.cli.dryrun import print_dryrun

            print_dryrun(info, as_json, show_secrets=False)
            return
        new = runner.schedule(info)
    if as_json:
        output.emit_json({"handle": new, "rerun_of": str(handle), "scheduler": info.scheduler})
    else:
        output.emit(new)
