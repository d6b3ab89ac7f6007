"""`trainlaunch list`."""

from __future__ import annotations

import click

from trainlaunch.cli import output, render
from trainlaunch.cli.backends import names, scheduler_option
from trainlaunch.cli.handles import SWEEP_ID
from trainlaunch.handles import SweepHandle
from trainlaunch.specs import AppState


@click.command("list")
@scheduler_option(lambda: f"Backend to list: {', '.join(names())} (default: {names()[0]}).")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([s.name for s in AppState], case_sensitive=False),
    help="Only apps in this state (repeatable).",
)
@click.option("--running", is_flag=True, help="Only apps that have not ended.")
@click.option(
    "--sweep", "sweep", type=SWEEP_ID, default=None, metavar="ID", help="The points of one sweep."
)
@output.json_option
def command(
    scheduler: str | None,
    states: tuple[str, ...],
    running: bool,
    sweep: SweepHandle | None,
    as_json: bool,
) -> None:
    """List apps, newest first (or the points of a sweep with --sweep).

    \b
    Example:
      trainlaunch list --running
    """
    from trainlaunch.runner import get_runner

    if sweep is not None:
        from trainlaunch.cli import sweep_view

        with get_runner() as runner:
            desc = runner.describe_sweep(sweep)
        sweep_view.show(desc, as_json)
        return

    with get_runner() as runner:
        rows = runner.list_apps(scheduler)  # every session's, with state (list() is the seed's)
    wanted = {s.upper() for s in states}
    rows = [
        r
        for r in rows
        if (not wanted or r.state.name in wanted) and (not running or not r.state.is_terminal)
    ]
    if as_json:
        output.emit_json(render.list_doc(rows))
    elif output.stdout_is_tty():
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None)
        # handles are copied into other commands: never truncate them
        table.add_column(
            "handle", no_wrap=True, min_width=max((len(r.app_handle) for r in rows), default=6)
        )
        for col in ("state", "name", "created", "note"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(
                r.app_handle,
                Text(r.state.name, style=render.STATE_STYLE.get(r.state, "")),
                r.name,
                render.when(r.created),
                r.msg,
            )
        output.rich_console().print(table)
    else:
        output.emit(render.list_text(rows))
