"""`trainlaunch runopts [SCHEDULER]`."""

from __future__ import annotations

from typing import Any

import click

from trainlaunch.cli import output
from trainlaunch.cli.backends import complete_scheduler


@click.command("runopts")
@click.argument("scheduler", required=False, shell_complete=complete_scheduler)
@output.json_option
def command(scheduler: str | None, as_json: bool) -> None:
    """Show the typed options (--cfg keys) of one or every scheduler backend.

    \b
    Example:
      trainlaunch runopts --json
    """
    from trainlaunch.runner import get_runner
    from trainlaunch.specs import runopts

    with get_runner() as runner:
        table = (
            {scheduler: runner.scheduler_run_opts(scheduler)}
            if scheduler
            else runner.backend_run_opts()
        )
    doc: dict[str, dict[str, Any] | None] = {}
    broken: dict[str, str] = {}
    for name, opts in table.items():
        if not isinstance(opts, runopts):  # shown with its error, never silently left out
            broken[name] = opts.message
            doc[name] = None
            continue
        doc[name] = {
            key: {
                "type": opt.type_name,
                "default": opt.default,
                "required": opt.is_required,
                "help": opt.help,
                "choices": list(opt.choices) or None,
            }
            for key, opt in opts
        }
    if as_json:
        for message in broken.values():
            output.narrate(f"warning: {message}")
        output.emit_json(doc)
        return
    lines = []
    for name, maybe in doc.items():
        if maybe is None:
            lines.append(f"{name}: cannot be loaded\n      {broken[name]}")
            continue
        lines.append(f"{name}:")
        for key, o in maybe.items():
            req = " (required)" if o["required"] else ""
            default = f" [default: {o['default']}]" if o["default"] is not None else ""
            kind = "|".join(o["choices"]) if o["choices"] else o["type"]
            lines.append(f"  {key} ({kind}){req}{default}\n      {o['help']}")
    output.emit("\n".join(lines))
