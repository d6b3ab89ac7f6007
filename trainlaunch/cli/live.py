"""Rich views for people: the status panel and the live view while waiting."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from trainlaunch.cli import render
from trainlaunch.schedulers.api import DescribeAppResponse
from trainlaunch.specs import AppState
from trainlaunch.sweeps.status import SweepDescription


def status_panel(handle: str, resp: DescribeAppResponse) -> Any:
    """A rich renderable: header, replica table, root cause."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    st = resp.status
    style = render.STATE_STYLE.get(st.state, "white")
    head = Text.assemble((handle, "bold"), "  ", (st.state.name, f"bold {style}"))
    if st.exit_code is not None:
        head.append(f"  exit {st.exit_code}")
    if st.num_restarts:
        head.append(f"  restarts {st.num_restarts}")
    if st.num_requeues:
        head.append(f"  requeues {st.num_requeues}")
    table = Table(box=None, pad_edge=False)
    for col in ("replica", "state", "exit", "restarts", "host"):
        table.add_column(col)
    for name, state, code, restarts, host in render.replica_rows(st):
        table.add_row(
            name,
            Text(state, style=render.STATE_STYLE.get(AppState[state], "")),
            code,
            restarts,
            host,
        )
    parts: list[Any] = [head]
    stall = resp.stall
    if stall:
        parts.append(Text(stall, style="bold yellow"))
    if st.msg and st.msg != stall:
        parts.append(Text(st.msg, style="dim"))
    if resp.waiting:  # a node of a multi-node job is late (docs/ddp.md)
        parts.append(Text(render.waiting_line(resp), style="bold yellow"))
    parts.append(table)
    hang = render.hang_lines(resp)  # per-rank progress, last hang (docs/hangs.md)
    if hang:
        parts.append(Text("\n".join(line[2:] for line in hang), style="yellow"))
    if len(st.attempts) > 1:
        history = Table(box=None, pad_edge=False, title="history", title_justify="left")
        for col in ("attempt", "reason", "start", "end"):
            history.add_column(col)
        for row in render.attempt_rows(st):
            history.add_row(*row)
        parts.append(history)
    failed = render.first_failure(st)
    if failed and failed.message:
        parts.append(Text("root cause:", style="bold red"))
        parts.append(Text(failed.message))
    return Group(*parts)


def view(handle: str, desc: DescribeAppResponse | SweepDescription) -> Any:
    """The live view of one poll: an app's status panel, or a sweep's table of points."""
    if isinstance(desc, SweepDescription):
        from rich.text import Text

        from trainlaunch.cli.sweep_view import text

        return Text(text(desc))
    return status_panel(handle, desc)


def watch(handle: str, polls: Iterator[Any]) -> Any:
    """Render the runner's polls as a live-updating view on stderr; return the last."""
    from rich.console import Console
    from rich.live import Live

    desc = next(polls)
    with Live(
        view(handle, desc),
        console=Console(stderr=True),
        refresh_per_second=8,
        transient=False,
    ) as live:
        for desc in polls:
            live.update(view(handle, desc))
    return desc
