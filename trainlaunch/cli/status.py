"""`trainlaunch status HANDLE`."""

from __future__ import annotations

import click

from trainlaunch.cli import output
from trainlaunch.cli.handles import HANDLE
from trainlaunch.handles import Handle


@click.command("status")
@click.argument("handle", type=HANDLE)
@output.json_option
def command(handle: Handle, as_json: bool) -> None:
    """Show the state of an app and its replicas, or of every point of a sweep (exit 0
    whatever the state).

    \b
    Example:
      trainlaunch status local://trainlaunch/train-x7k2m9p4qa
    """
    from trainlaunch.cli.views import show_status
    from trainlaunch.runner import get_runner

    with get_runner() as runner:
        desc = runner.describe_handle(handle)
    show_status(desc, str(handle), as_json)
