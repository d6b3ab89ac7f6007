"""Whose option is it? The group's, the subcommand's, or a component's (after its name)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # completion only: `run` itself does not import it
    from click.shell_completion import CompletionItem

# TorchX's spellings of `run` options, and what they are called here
TORCHX_RUN_OPTIONS = {
    "--scheduler_args": "--cfg",
    "--scheduler-args": "--cfg",
    "-cfg": "--cfg",
    "--dry-run": "--dryrun",
    "--dry_run": "--dryrun",
}
# TorchX's (and habit's) command names, and ours
COMMAND_ALIASES = {
    "log": "logs",
    "cancel": "stop",
    "kill": "stop",
    "ls": "list",
    "show": "describe",
    "info": "describe",
    "version": "--version",
    "help": "--help",
}


def passes_everything(cmd: click.Command) -> bool:
    """A command whose whole command line is someone else's (torchrun's): no options of ours
    (`rerun` passes on only what follows its HANDLE: its own options take --debug too)."""
    return not any(isinstance(p, click.Option) for p in cmd.params)


def trainlaunch_options(group: click.Group, args: Sequence[str]) -> set[str]:
    """The option names on the command line that trainlaunch itself parses.

    Group options come before the subcommand; a subcommand's options up to ``--`` or, for
    ``run``, up to the component's name: everything after it belongs to the component.
    """
    found: set[str] = set()
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        found.add(args[i].split("=", 1)[0])
        i += 1
    if i >= len(args):
        return found
    try:
        cmd = group.get_command(click.Context(group), args[i])
    except Exception:  # noqa: BLE001 - a broken subcommand: only the group's options count
        return found
    if cmd is None or passes_everything(cmd):
        return found  # no subcommand, or one that hands its whole line on (torchrun)
    takes_value = {
        name
        for p in cmd.params
        if isinstance(p, click.Option) and not p.is_flag and not p.count
        for name in p.opts
    }
    passes_rest = any(
        isinstance(p, click.Argument) and p.nargs == -1 and p.type is click.UNPROCESSED
        for p in cmd.params
    )
    rest = list(args[i + 1 :])
    j = 0
    while j < len(rest):
        tok = rest[j]
        if tok == "--":
            break
        if tok.startswith("-") and len(tok) > 1:
            name = tok.split("=", 1)[0]
            found.add(name)
            if name in takes_value and "=" not in tok:
                j += 1
        elif passes_rest:
            break  # the component's name: the rest is its arguments
        j += 1
    return found


def suggest(name: str, known: Sequence[str], aliases: dict[str, str] | None = None) -> str | None:
    """``did you mean X?`` for a mistyped name, or None."""
    if aliases and name in aliases:
        return f"did you mean {aliases[name]!r}?"
    dashed = name.replace("_", "-")
    if dashed != name and dashed in known:
        return f"did you mean {dashed!r}?"
    import difflib  # only on a usage error

    close = difflib.get_close_matches(name, known, n=2)
    if close:
        return "did you mean " + " or ".join(repr(c) for c in close) + "?"
    return None


def subcommand_option(group: click.Command, args: Sequence[str], option: str) -> str | None:
    """`trainlaunch --seed 3 run ...`: a hint that names where the option goes, or None."""
    if not isinstance(group, click.Group):
        return None
    ctx = click.Context(group)
    names = group.list_commands(ctx)
    name = next((a for a in args if a in names), None)
    if name is None:  # `trainlaunch --json lgs`: the command meant, else any that takes it
        import difflib

        words = [a for a in args if not a.startswith("-")]
        close = difflib.get_close_matches(words[0], names, n=1) if words else []
        takers = [n for n in names if _takes(group, ctx, n, option)]
        if not takers:
            return None
        whose = ", ".join(f"`{n}`" for n in takers) if len(takers) <= 3 else "the commands"
        one = takers[0] if len(takers) == 1 else "COMMAND"
        where = close[0] if close and close[0] in takers else one
        return f"{option} is an option of {whose}: put it after the command: trainlaunch {where} {option}"
    if not _takes(group, ctx, name, option):
        return None
    return f"{option} is an option of `{name}`: put it after the subcommand: trainlaunch {name} {option}"


def _takes(group: click.Group, ctx: click.Context, name: str, option: str) -> bool:
    """Whether subcommand name has option."""
    try:
        cmd = group.get_command(ctx, name)
    except Exception:  # noqa: BLE001 - no hint is better than a crash while reporting
        return False
    return cmd is not None and any(option in p.opts for p in cmd.params)


def complete_component(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of `run COMPONENT`: the builtins and installed entry points."""
    from trainlaunch.resolver import list_components

    return [name for name, _ in list_components() if name.startswith(incomplete)]


def complete_component_args(
    ctx: click.Context, param: click.Parameter | None, incomplete: str
) -> list[CompletionItem]:
    """Shell completion after a component's name: its options (`run dist.ddp --npr<TAB>` ->
    --nproc-per-node, --nproc), each with its help, and the values of one with choices
    (`--rdzv-backend <TAB>`); nothing for positional arguments (files: the shell's)."""
    from click.shell_completion import CompletionItem

    component = ctx.params.get("component")
    if not component:
        return []
    try:
        from trainlaunch.resolver import find_component

        spec = find_component(component).spec()
    except Exception:  # noqa: BLE001 - completion must never print a traceback into a shell
        return []
    if incomplete.startswith("-"):
        return [
            CompletionItem(name, help=(option.help.splitlines() or [""])[0])
            for option in spec.options
            for name in option.names
            if name.startswith(incomplete)
        ]
    typed = ctx.params.get("args") or ()
    found = spec.lookup.get(typed[-1]) if typed else None
    choices = found[0].info.item.choices if found and found[0].info.item else ()
    return [CompletionItem(c) for c in choices if c.startswith(incomplete)]


class ComponentCommand(click.Command):
    """A command whose arguments after COMPONENT are the component's own (`run`, `sweep`):
    there, an option being typed completes as one of the component's, not of the command."""

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """The component's options once its name is on the command line, else the command's."""
        if ctx.params.get("component"):
            return complete_component_args(ctx, None, incomplete)
        return super().shell_complete(ctx, incomplete)
