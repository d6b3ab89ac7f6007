"""Waiting for an app (or every point of a sweep) and saying how it ended: the Runner's one
polling rule, the one exit-code rule (runner/outcome.py), a view per kind of description."""

from __future__ import annotations

import functools
from typing import Any

from trainlaunch.cli import output, render, sweep_view
from trainlaunch.errors import AppFailed
from trainlaunch.handles import Handle
from trainlaunch.runner import Runner, last_of
from trainlaunch.runner.outcome import outcome
from trainlaunch.schedulers.api import DescribeAppResponse
from trainlaunch.specs import AppState
from trainlaunch.sweeps.status import SweepDescription


def wait_for(runner: Runner, handle: Handle | str, timeout: float | None, live: bool) -> Any:
    """Follow the runner's poller until terminal (a live view on a terminal); the last
    description (an app's, or a sweep's)."""
    polls = runner.poll(handle, timeout)
    if live:
        from trainlaunch.cli.live import watch

        return watch(str(handle), polls)
    return last_of(polls)  # the poller's last description is the terminal one


def finish(handle: str, desc: Any, as_json: bool, app_exit_code: bool) -> None:
    """Report the final state; raise AppFailed with the documented exit code unless it
    SUCCEEDED (every point, for a sweep)."""
    _final(desc, handle, as_json, app_exit_code)


@functools.singledispatch
def _final(desc: object, handle: str, as_json: bool, app_exit_code: bool) -> None:
    raise TypeError(f"no final view of {type(desc).__name__}")


@_final.register
def _(desc: DescribeAppResponse, handle: str, as_json: bool, app_exit_code: bool) -> None:
    if as_json:
        output.emit_json(render.status_doc(handle, desc))
    st = desc.status
    result = outcome([st], app_exit_code)
    if result.state == AppState.SUCCEEDED:
        if not as_json:
            output.narrate(f"{handle} SUCCEEDED")
        return
    msg = f": {st.msg}" if st.msg else ""
    if result.state == AppState.CANCELLED:
        raise AppFailed(f"{handle} CANCELLED{msg}", exit_code=result.exit_code)
    if result.state == AppState.UNKNOWN:  # ended, but its result was lost: not a failure
        raise AppFailed(
            f"{handle} ended with an UNKNOWN result{msg}",
            exit_code=result.exit_code,
            hint=f"trainlaunch logs {handle}",
        )
    failed = render.first_failure(st)
    detail = f"\n{failed.message}" if failed and failed.message and not as_json else ""
    if desc.failure is not None and not as_json:  # why, in one line, last: what a person reads
        detail += "\n" + "\n".join(render.failure_lines(desc, indent=""))
    # no replica failed on its own (the hang watchdog stopped them all): status's message
    where = f" ({failed.role}/{failed.id}, exit {st.exit_code})" if failed else msg
    raise AppFailed(
        f"{handle} {st.state.name}{where}{detail}",
        exit_code=result.exit_code,
        hint=f"trainlaunch logs {handle}",
    )


@_final.register
def _(desc: SweepDescription, handle: str, as_json: bool, app_exit_code: bool) -> None:
    sweep_view.show(desc, as_json)
    result = outcome(desc.statuses(), app_exit_code)
    if result.first is None:
        return
    first = desc.points[result.first]
    n, total = len(result.apps), len(desc.points)
    said = {AppState.FAILED: "FAILED", AppState.UNKNOWN: "ended with an UNKNOWN result"}
    what = said.get(result.state, result.state.name)
    never = sum(desc.points[i].handle is None for i in result.apps)  # FAILED counts these
    unsaid = ", never submitted"  # said of the first point unless every one of them is so
    if never and never == n:
        what, unsaid = "never submitted", ""
    elif never:
        n, what = n - never, f"{what}, {never} never submitted"
    message = f"{desc.handle}: {n} of {total} apps {what}"
    if result.state == AppState.CANCELLED:
        raise AppFailed(message, exit_code=result.exit_code)
    raise AppFailed(
        f"{message} (first: {first.handle or f'point {first.index}{unsaid}'})",
        exit_code=result.exit_code,
        hint=f"trainlaunch logs {first.handle}"
        if first.handle
        else f"trainlaunch status {desc.handle}",
    )
