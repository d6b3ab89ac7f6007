"""Whose option is it? The group's, the subcommand's, or a component's (after its name)."""

from __future__ import annotations

from collections.abc import Sequence

import click

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
    if cmd is None or cmd.context_settings.get("ignore_unknown_options"):
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
    name = next((a for a in args if a in group.list_commands(ctx)), None)
    if name is None:
        return None
    try:
        cmd = group.get_command(ctx, name)
    except Exception:  # noqa: BLE001 - no hint is better than a crash while reporting
        return None
    if cmd is None or not any(option in p.opts for p in cmd.params):
        return None
    return f"{option} is an option of `{name}`: put it after the subcommand: trainlaunch {name} {option}"


def complete_component(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of `run COMPONENT`: the builtins and installed entry points."""
    from trainlaunch.resolver import list_components

    return [name for name, _ in list_components() if name.startswith(incomplete)]


def complete_app_id(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of HANDLE: the local apps' ids, newest first (reads, never creates)."""
    import os

    from trainlaunch import store

    try:
        apps = store.existing_apps_dir()
        entries = list(os.scandir(apps)) if apps else []
    except Exception:  # noqa: BLE001 - completion must never print a traceback into a shell
        return []
    entries.sort(key=lambda e: e.stat().st_mtime, reverse=True)
    return [e.name for e in entries if e.is_dir() and e.name.startswith(incomplete)]
