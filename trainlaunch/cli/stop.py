"""`trainlaunch stop HANDLE`."""

from __future__ import annotations

import click

from trainlaunch.cli import output
from trainlaunch.cli.backends import LazyHelpOption, able
from trainlaunch.cli.handles import HANDLE
from trainlaunch.handles import Handle


@click.command("stop")
@click.argument("handle", type=HANDLE)
@click.option(
    "--requeue",
    cls=LazyHelpOption,
    is_flag=True,
    lazy_help=lambda: (
        "Preempt instead: SIGTERM, the grace period, then the app runs again "
        f"(counts against max_requeues; {able('requeue')})."
    ),
)
@output.json_option
def command(handle: Handle, requeue: bool, as_json: bool) -> None:
    """Stop an app (a sweep: every point): SIGTERM to every process, the grace period, then
    SIGKILL.

    Returns once the app is terminal and none of its processes is left. With --requeue,
    returns once the app was stopped and queued again (or ended, with no requeues left).

    \b
    Example:
      trainlaunch stop local://trainlaunch/train-x7k2m9p4qa
    """
    from trainlaunch.cli.views import show_stopped
    from trainlaunch.runner import get_runner

    with get_runner() as runner:
        if requeue:
            runner.requeue(handle)
        else:
            runner.cancel(handle)  # a sweep: queued points first, then the running ones
        desc = runner.describe_handle(handle)  # an unknown handle: AppNotFound, exit 4
    show_stopped(desc, str(handle), as_json)
