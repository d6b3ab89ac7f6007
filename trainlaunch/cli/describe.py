"""`trainlaunch describe HANDLE`."""

from __future__ import annotations

import click

from trainlaunch.cli import output, render
from trainlaunch.cli.handles import HANDLE
from trainlaunch.handles import Handle


@click.command("describe")
@click.argument("handle", type=HANDLE)
@click.option(
    "--show-secrets",
    is_flag=True,
    help="Print env values of names like *TOKEN*, *SECRET*, *PASSWORD*, *KEY*.",
)
@output.json_option
def command(handle: Handle, show_secrets: bool, as_json: bool) -> None:
    """Show how an app was submitted: its AppDef, options and rank settings (seed...).

    \b
    Example:
      trainlaunch describe local://trainlaunch/train-x7k2m9p4qa
    """
    from trainlaunch.runner import get_runner

    with get_runner() as runner:
        resp = runner.describe_app(handle)  # a sweep's handle: a usage error (many apps)
    if as_json:
        output.emit_json(render.describe_doc(str(handle), resp, show_secrets))
    else:
        output.emit(render.describe_text(str(handle), resp, show_secrets))
