"""What `status` and `stop` print: one app's description, or a sweep's (every point).

The Runner answers a handle with a description; the view is chosen by the description's
type (functools.singledispatch), so no command looks at what kind of handle it was given.
"""

from __future__ import annotations

import functools

from trainlaunch.cli import output, render, sweep_view
from trainlaunch.schedulers.api import DescribeAppResponse
from trainlaunch.sweeps.status import SweepDescription


@functools.singledispatch
def show_status(desc: object, handle: str, as_json: bool) -> None:
    """`status`: a panel on a terminal, plain text in a pipe, one document with --json."""
    raise TypeError(f"no status view of {type(desc).__name__}")


@show_status.register
def _(desc: DescribeAppResponse, handle: str, as_json: bool) -> None:
    if as_json:
        output.emit_json(render.status_doc(handle, desc))
    elif output.stdout_is_tty():
        from trainlaunch.cli.live import status_panel

        output.rich_console().print(status_panel(handle, desc))
    else:
        output.emit(render.status_text(handle, desc))


@show_status.register
def _(desc: SweepDescription, handle: str, as_json: bool) -> None:
    sweep_view.show(desc, as_json)


@functools.singledispatch
def show_stopped(desc: object, handle: str, as_json: bool) -> None:
    """`stop`: the state it ended in (a sweep: every point's)."""
    raise TypeError(f"no stop view of {type(desc).__name__}")


@show_stopped.register
def _(desc: DescribeAppResponse, handle: str, as_json: bool) -> None:
    if as_json:
        output.emit_json(render.status_doc(handle, desc))
    else:
        output.emit(f"{handle}\t{desc.status.state.name}")
    # what the stop found outside the app's process groups, and how (node/appgroup.py)
    strays = [p for p in desc.status.msg.split("; ") if p.startswith("also stopped ")]
    if strays:
        output.narrate(strays[0])


@show_stopped.register
def _(desc: SweepDescription, handle: str, as_json: bool) -> None:
    sweep_view.show(desc, as_json)


__all__ = ["show_status", "show_stopped"]
