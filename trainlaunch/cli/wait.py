"""`trainlaunch wait HANDLE`."""

from __future__ import annotations

import click

from trainlaunch.cli import output
from trainlaunch.cli.handles import HANDLE
from trainlaunch.handles import Handle


def _seconds(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and value != value:  # NaN passes FloatRange: no comparison fails
        raise click.BadParameter("expected a number of seconds, got nan")
    return value


@click.command("wait")
@click.argument("handle", type=HANDLE)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=None,
    callback=_seconds,
    help="Give up after this many seconds (exit 7).",
)
@click.option(
    "--app-exit-code",
    is_flag=True,
    help="On failure exit with the failing replica's exit code instead of 1.",
)
@output.json_option
def command(handle: Handle, timeout: float | None, app_exit_code: bool, as_json: bool) -> None:
    """Wait for an app (a sweep: every point) to end.

    Exit 0 if it SUCCEEDED, 1 if it FAILED (or the failing replica's code with
    --app-exit-code), 8 if it ended but how is unknown (UNKNOWN: see its message), 6 if it
    was CANCELLED, 7 on --timeout; for a sweep the first of these that any point has.
    Ctrl-C stops waiting, not the app.

    \b
    Example:
      trainlaunch wait --timeout 3600 local://trainlaunch/train-x7k2m9p4qa
    """
    from trainlaunch.cli.boundary import raise_on_sigterm
    from trainlaunch.cli.waiting import finish, wait_for
    from trainlaunch.runner import get_runner

    raise_on_sigterm()  # SIGTERM/SIGHUP end the wait (exit 130), never the app
    with get_runner() as runner:
        desc = wait_for(runner, handle, timeout, live=output.stderr_is_tty() and not as_json)
    finish(str(handle), desc, as_json, app_exit_code)
