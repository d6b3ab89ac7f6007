"""`trainlaunch describe HANDLE`."""

from __future__ import annotations

import click

from trainlaunch.cli import argv, output, render


@click.command("describe")
@click.argument("handle", shell_complete=argv.complete_app_id)
@click.option(
    "--show-secrets",
    is_flag=True,
    help="Print env values of names like *TOKEN*, *SECRET*, *PASSWORD*, *KEY*.",
)
@output.json_option
def command(handle: str, show_secrets: bool, as_json: bool) -> None:
    """Show how an app was submitted: its AppDef, options and rank settings (seed...)."""
    from trainlaunch.handles import parse_app_handle
    from trainlaunch.runner import get_runner

    handle = str(parse_app_handle(handle))
    with get_runner() as runner:
        resp = runner.describe_app(handle)
    if as_json:
        output.emit_json(render.describe_doc(handle, resp, show_secrets))
    else:
        output.emit(render.describe_text(handle, resp, show_secrets))
