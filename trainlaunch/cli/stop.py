"""`trainlaunch stop HANDLE`."""

from __future__ import annotations

import click

from trainlaunch.cli import argv, output, render


@click.command("stop")
@click.argument("handle", shell_complete=argv.complete_app_id)
@click.option(
    "--requeue",
    is_flag=True,
    help="Preempt instead: SIGTERM, the grace period, then the app runs again "
    "(counts against max_requeues; local and slurm).",
)
@output.json_option
def command(handle: str, requeue: bool, as_json: bool) -> None:
    """Stop an app: SIGTERM to every process, the grace period, then SIGKILL.

    Returns once the app is terminal and none of its processes is left. With --requeue,
    returns once the app was stopped and queued again (or ended, with no requeues left).
    """
    from trainlaunch.handles import parse_app_handle
    from trainlaunch.runner import get_runner
    from trainlaunch.sweep_runs import sweep_id_of

    if sid := sweep_id_of(handle):  # a whole sweep (docs/sweeps.md)
        from trainlaunch.cli import sweep_group

        sweep_group.stop(handle, sid, as_json)
        return
    handle = str(parse_app_handle(handle))
    with get_runner() as runner:
        if requeue:
            runner.requeue(handle)
        else:
            runner.cancel(handle)
        resp = runner.describe_app(handle)
    if as_json:
        output.emit_json(render.status_doc(handle, resp))
    else:
        output.emit(f"{handle}\t{resp.status.state.name}")
