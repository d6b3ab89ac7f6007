"""`trainlaunch builtins`."""

from __future__ import annotations

import click

from trainlaunch.cli import output


@click.command("builtins")
@output.json_option
def command(as_json: bool) -> None:
    """List the components that can be run (builtins and installed entry points).

    \b
    Example:
      trainlaunch builtins
    """
    from trainlaunch.resolver import list_components

    rows = list_components()
    if as_json:
        output.emit_json([{"name": n, "description": d} for n, d in rows])
        return
    width = max((len(n) for n, _ in rows), default=0)
    output.emit("\n".join(f"{n:<{width}}  {d}" for n, d in rows))
