"""Waiting for an app and turning its final state into the documented exit code."""

from __future__ import annotations

import time

from trainlaunch.cli import output, render
from trainlaunch.errors import AppFailed, ExitCode, WaitTimeout
from trainlaunch.runner import Runner
from trainlaunch.schedulers.api import DescribeAppResponse
from trainlaunch.specs import AppState


def wait_for(runner: Runner, handle: str, timeout: float | None, live: bool) -> DescribeAppResponse:
    """Poll until terminal (live rich view on a terminal); WaitTimeout after timeout."""
    if live and timeout is None:
        from trainlaunch.cli.live import watch

        return watch(handle, lambda: runner.describe_app(handle))
    deadline = None if timeout is None else time.monotonic() + timeout
    interval = 0.02
    while True:
        resp = runner.describe_app(handle)
        if resp.status.is_terminal:
            return resp
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimeout(
                f"{handle} is still {resp.status.state.name} after {timeout:g}s",
                hint="`trainlaunch wait` again, or `trainlaunch stop` it",
            )
        time.sleep(interval)
        interval = min(interval * 1.5, 0.1)  # a local status read costs ~1 ms


def finish(handle: str, resp: DescribeAppResponse, as_json: bool, app_exit_code: bool) -> None:
    """Report the final state; raise AppFailed with the documented exit code unless SUCCEEDED."""
    if as_json:
        output.emit_json(render.status_doc(handle, resp))
    st = resp.status
    if st.state == AppState.SUCCEEDED:
        if not as_json:
            output.narrate(f"{handle} SUCCEEDED")
        return
    failed = render.first_failure(st)
    detail = f"\n{failed.message}" if failed and failed.message and not as_json else ""
    if st.state == AppState.CANCELLED:
        raise AppFailed(
            f"{handle} CANCELLED{(': ' + st.msg) if st.msg else ''}", exit_code=ExitCode.CANCELLED
        )
    if st.state == AppState.UNKNOWN:  # ended, but its result was lost: not a failure
        raise AppFailed(
            f"{handle} ended with an UNKNOWN result{(': ' + st.msg) if st.msg else ''}",
            exit_code=ExitCode.UNKNOWN_RESULT,
            hint=f"trainlaunch logs {handle}",
        )
    code = int(ExitCode.APP_FAILED)
    if app_exit_code and st.exit_code:
        code = st.exit_code
    where = f" ({failed.role}/{failed.id}, exit {st.exit_code})" if failed else ""
    raise AppFailed(
        f"{handle} {st.state.name}{where}{detail}",
        exit_code=code,
        hint=f"trainlaunch logs {handle}",
    )
