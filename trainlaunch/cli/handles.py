"""HANDLE arguments: parsed once, here, into a value (AppHandle or SweepHandle), completed by
asking the Runner what its backends know."""

from __future__ import annotations

from typing import Any

import click
from click.shell_completion import CompletionItem

from trainlaunch.errors import UsageError
from trainlaunch.handles import (
    LogTarget,
    SweepHandle,
    check_sweep_id,
    parse_handle,
    parse_log_target,
)


class HandleType(click.ParamType):
    """``scheduler://session/app_id``, a bare app id, or a sweep's handle -> its value.

    A malformed handle is our UsageError (the boundary prints it as ``error: ...``, exit 2).
    """

    name = "handle"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The handle's value (parsed once; a value passes through)."""
        return parse_handle(value)

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        """The handles (or bare ids of the default backend) that start with incomplete."""
        return [CompletionItem(c) for c in complete_handle(incomplete)]


class LogTargetType(HandleType):
    """``HANDLE[/ROLE[/REPLICA,...]]`` -> a LogTarget (its handle parsed once)."""

    name = "target"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The target's value."""
        return value if isinstance(value, LogTarget) else parse_log_target(value)


class SweepIdType(HandleType):
    """A sweep's id or handle -> its SweepHandle (``list --sweep``)."""

    name = "sweep"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The sweep's handle (a bare id is a sweep of any backend)."""
        try:
            parsed = parse_handle(value)
        except UsageError:
            parsed = None
        if isinstance(parsed, SweepHandle):
            return parsed
        return SweepHandle("", "", check_sweep_id(value))


HANDLE = HandleType()
LOG_TARGET = LogTargetType()
SWEEP_ID = SweepIdType()


def complete_handle(incomplete: str) -> list[str]:
    """Shell completion of HANDLE: the apps a backend lists, newest first; a bare prefix
    completes app ids of the default backend, ``scheduler://`` that backend's handles.

    It asks the Runner (never a backend's files) and never prints an error into a shell.
    """
    from trainlaunch.runner import get_runner

    scheduler, sep, _ = incomplete.partition("://")
    try:
        with get_runner() as runner:
            rows = runner.list_apps(scheduler if sep else None)
    except Exception:  # noqa: BLE001 - completion must never print a traceback into a shell
        return []
    if sep:
        return [r.app_handle for r in rows if r.app_handle.startswith(incomplete)]
    return [r.app_id for r in rows if r.app_id.startswith(incomplete)]


__all__ = ["HANDLE", "LOG_TARGET", "SWEEP_ID", "HandleType", "complete_handle"]
