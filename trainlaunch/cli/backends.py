"""What the CLI says about backends, asked of the registry and each backend's capabilities and
options when a help text is shown (never spelled out here: a new backend changes no cli/ file).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


class LazyHelpOption(click.Option):
    """An option whose help text is computed when help is shown (it may load backends)."""

    def __init__(self, *args: Any, lazy_help: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_help = lazy_help

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        """The help line, with the text asked for now."""
        try:
            self.help = self.lazy_help()
        except Exception:  # noqa: BLE001 - a broken plugin must not break --help
            self.help = self.help or ""
        return super().get_help_record(ctx)


def names() -> list[str]:
    """Every backend's name, the default first (the registry: nothing imported)."""
    from trainlaunch import schedulers

    return schedulers.scheduler_names()


def complete_scheduler(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of -s/--scheduler (and runopts SCHEDULER): the registry's names."""
    try:
        return [n for n in names() if n.startswith(incomplete)]
    except Exception:  # noqa: BLE001 - completion must never print a traceback into a shell
        return []


def scheduler_option(lazy_help: Callable[[], str], many: bool = False) -> Any:
    """``-s/--scheduler``: one backend (``scheduler``) or, with many, repeatable
    (``schedulers``); its help asks the registry when shown, its values complete."""
    names_ = ["-s", "--scheduler", "schedulers"] if many else ["-s", "--scheduler"]
    return click.option(
        *names_,
        cls=LazyHelpOption,
        default=None,
        multiple=many,
        metavar="SCHED" if many else None,
        lazy_help=lazy_help,
        shell_complete=complete_scheduler,
    )


def scheduler_help() -> str:
    """-s/--scheduler."""
    from trainlaunch import schedulers

    return (
        f"Backend: {', '.join(names())} (default: {schedulers.DEFAULT_SCHEDULER}, or the "
        "config's [run] scheduler)."
    )


def able(capability: str) -> str:
    """``A, B and C``: the backends that offer a capability."""
    from trainlaunch import schedulers

    found = schedulers.with_capability(capability)
    return " and ".join([", ".join(found[:-1]), found[-1]] if len(found) > 1 else found)


def snapshot_defaults() -> str:
    """``on for A, off for B``: each snapshotting backend's default."""
    from trainlaunch.runner import get_runner

    parts = []
    with get_runner() as runner:
        for name, opts in runner.run_opts().items():
            opt = opts.get("snapshot")
            if opt is not None and runner.capabilities(name).snapshots:
                parts.append(f"{opt.default} for {name}")
    return ", ".join(parts)


def max_parallel_keepers() -> str:
    """``A: queued on this machine, B: a job array``: who keeps --max-parallel, and how."""
    from trainlaunch.sweeps.runs import limit_keepers

    return ", ".join(f"{name}: {how}" for name, how in limit_keepers().items())


__all__ = [
    "LazyHelpOption",
    "able",
    "complete_scheduler",
    "max_parallel_keepers",
    "names",
    "scheduler_help",
    "snapshot_defaults",
]
