"""`trainlaunch runopts [SCHEDULER]`."""

from __future__ import annotations

import click

from trainlaunch.cli import output


@click.command("runopts")
@click.argument("scheduler", required=False)
@output.json_option
def command(scheduler: str | None, as_json: bool) -> None:
    """Show the typed options (--cfg keys) of one or every scheduler backend."""
    from trainlaunch.runner import get_runner

    with get_runner() as runner:
        table = (
            {scheduler: runner.scheduler_run_opts(scheduler)} if scheduler else runner.run_opts()
        )
    doc = {
        name: {
            key: {
                "type": opt.type_name,
                "default": opt.default,
                "required": opt.is_required,
                "help": opt.help,
            }
            for key, opt in opts
        }
        for name, opts in table.items()
    }
    if as_json:
        output.emit_json(doc)
        return
    lines = []
    for name, opts in doc.items():
        lines.append(f"{name}:")
        for key, o in opts.items():
            req = " (required)" if o["required"] else ""
            default = f" [default: {o['default']}]" if o["default"] is not None else ""
            lines.append(f"  {key} ({o['type']}){req}{default}\n      {o['help']}")
    output.emit("\n".join(lines))
