"""The ``trainlaunch`` command: a lazy click group (subcommands are imported when used)."""

from __future__ import annotations

import importlib

import click

from trainlaunch import settings
from trainlaunch.schedulers import BUILTIN_SCHEDULERS

# name -> (module, one-line help). Kept literal so `trainlaunch --help` imports nothing else.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("trainlaunch.cli.run", "Run a component; print its handle."),
    "status": ("trainlaunch.cli.status", "Show the state of an app and its replicas."),
    "logs": ("trainlaunch.cli.logs", "Print (or follow) the logs of an app."),
    "stop": ("trainlaunch.cli.stop", "Stop an app and every process of it."),
    "wait": ("trainlaunch.cli.wait", "Wait for an app to end; exit code tells how it ended."),
    "list": ("trainlaunch.cli.listing", "List apps."),
    "describe": ("trainlaunch.cli.describe", "Show how an app was submitted."),
    "rerun": ("trainlaunch.cli.rerun", "Submit an app again from its record."),
    "builtins": ("trainlaunch.cli.builtins", "List the components that can be run."),
    "runopts": ("trainlaunch.cli.runopts_cmd", "Show the options of scheduler backends."),
    "metrics": ("trainlaunch.cli.metrics", "Show the metrics an app's ranks logged."),
    "sweep": ("trainlaunch.cli.sweep", "Run a component over a grid of parameters and seeds."),
    "stack": ("trainlaunch.cli.stack", "Show where every rank of a running app is (grouped)."),
    "torchrun": ("trainlaunch.cli.torchrun", "torchrun's exact command line, in the foreground."),
    "doctor": ("trainlaunch.cli.doctor", "Check that this machine can run jobs (one table)."),
    "top": ("trainlaunch.cli.top.command", "Watch running apps live in the terminal."),
    "ui": (
        "trainlaunch.cli.ui.command",
        "Serve a read-only dashboard as a web page on this machine.",
    ),
}


class LazyGroup(click.Group):
    """A group whose subcommands live in their own modules, loaded on demand."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module = importlib.import_module(COMMANDS[cmd_name][0])
        return with_global_options(module.command)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0]
        if name not in COMMANDS and not name.startswith("-") and not ctx.resilient_parsing:
            from trainlaunch.cli.argv import COMMAND_ALIASES, suggest
            from trainlaunch.errors import UsageError

            hint = suggest(name, list(COMMANDS), COMMAND_ALIASES)
            raise UsageError(
                f"no command named {name!r}",
                hint=f"{hint} (commands: {', '.join(COMMANDS)})"
                if hint
                else f"commands: {', '.join(COMMANDS)}",
            )
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_) for name, (_, help_) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def with_global_options(cmd: click.Command) -> click.Command:
    """Let the group's --debug and --version also work after the subcommand (once per command)."""
    from trainlaunch.cli.argv import passes_everything

    if any(p.name == "debug" for p in cmd.params) or passes_everything(cmd):
        return cmd
    # read by the error boundary from the command line (cli/argv.py), so it needs no value here
    cmd.params.append(
        click.Option(
            ["--debug"],
            is_flag=True,
            expose_value=False,
            help="Show full tracebacks for errors (same as `trainlaunch --debug`).",
        )
    )
    click.version_option(package_name="trainlaunch", prog_name="trainlaunch", hidden=True)(cmd)
    return cmd


EPILOG = """\b
Exit codes: 0 ok, 1 app failed (wait), 2 usage error, 3 scheduler error,
4 app not found, 5 app store error, 6 app cancelled (wait), 7 wait timed out,
8 app ended, result unknown (wait), 9 its preflight refused the app (wait),
70 internal error, 130 interrupted.
A closed stdout (`| head`) is 0. See docs/cli.md.
"""


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
@click.version_option(package_name="trainlaunch", prog_name="trainlaunch")
@click.option(
    "--debug", is_flag=True, envvar=settings.DEBUG, help="Show full tracebacks for errors."
)
def cli(debug: bool) -> None:
    """Launch PyTorch training (the help text names the registry's backends: below)."""


cli.help = (  # the registry's names: a new backend needs no change here
    f"trainlaunch: launch PyTorch training on {', '.join(BUILTIN_SCHEDULERS)} backends."
)
