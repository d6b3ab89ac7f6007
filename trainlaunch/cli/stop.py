"""`trainlaunch stop HANDLE`."""

from __future__ import annotations

import click

from trainlaunch.cli import output, render


@click.command("stop")
@click.argument("handle")
@output.json_option
def command(handle: str, as_json: bool) -> None:
    """Stop an app: SIGTERM to every process, the grace period, then SIGKILL.

    Returns once the app is terminal and none of its processes is left.
    """
    from trainlaunch.handles import parse_app_handle
    from trainlaunch.runner import get_runner

    handle = str(parse_app_handle(handle))
    with get_runner() as runner:
        runner.cancel(handle)
        resp = runner.describe_app(handle)
    if as_json:
        output.emit_json(render.status_doc(handle, resp))
    else:
        output.emit(f"{handle}\t{resp.status.state.name}")
