"""`trainlaunch status HANDLE`."""

from __future__ import annotations

import click

from trainlaunch.cli import argv, output, render


@click.command("status")
@click.argument("handle", shell_complete=argv.complete_app_id)
@output.json_option
def command(handle: str, as_json: bool) -> None:
    """Show the state of an app and its replicas (exit 0 whatever the app's state)."""
    from trainlaunch.handles import parse_app_handle
    from trainlaunch.runner import get_runner
    from trainlaunch.sweep_runs import sweep_id_of

    if sid := sweep_id_of(handle):  # a whole sweep (docs/sweeps.md)
        from trainlaunch.cli import sweep_group

        sweep_group.status(handle, sid, as_json)
        return
    handle = str(parse_app_handle(handle))
    with get_runner() as runner:
        resp = runner.describe_app(handle)
    if as_json:
        output.emit_json(render.status_doc(handle, resp))
    elif output.stdout_is_tty():
        from trainlaunch.cli.live import status_panel

        output.rich_console().print(status_panel(handle, resp))
    else:
        output.emit(render.status_text(handle, resp))
