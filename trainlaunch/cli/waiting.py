"""Waiting for an app and turning its final state into the documented exit code."""

from __future__ import annotations

from trainlaunch.cli import output, render
from trainlaunch.errors import AppFailed, ExitCode
from trainlaunch.runner import Runner, last_of
from trainlaunch.schedulers.api import DescribeAppResponse
from trainlaunch.specs import AppState


def wait_for(runner: Runner, handle: str, timeout: float | None, live: bool) -> DescribeAppResponse:
    """Follow the runner's poller until terminal (live rich view on a terminal)."""
    polls = runner.poll(handle, timeout)
    if live:
        from trainlaunch.cli.live import watch

        return watch(handle, polls)
    return last_of(polls)  # the poller's last description is the terminal one


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
