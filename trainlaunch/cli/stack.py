"""`trainlaunch stack HANDLE`: where every rank of a running app is, grouped."""

from __future__ import annotations

import click

from trainlaunch.cli import output
from trainlaunch.cli.handles import HANDLE
from trainlaunch.handles import Handle


@click.command("stack")
@click.argument("handle", type=HANDLE)
@click.option(
    "--rank", "ranks", default=None, metavar="R,R-R", help="Only these ranks, e.g. 1 or 0,2-3."
)
@click.option("--native", is_flag=True, help="Include C/C++ frames (py-spy --native).")
@click.option("--summary", is_flag=True, help="One line per group, no frames.")
@click.option(
    "--collectives",
    is_flag=True,
    help="First say which collective the ranks wait in and which never entered it (torch's "
    "Flight Recorder; on with --hang-timeout).",
)
@output.json_option
def command(
    handle: Handle,
    ranks: str | None,
    native: bool,
    summary: bool,
    collectives: bool,
    as_json: bool,
) -> None:
    """Dump the Python stack of every rank of a running app, all at the same moment.

    Ranks with identical stacks are shown once (`ranks 0,2-3: all_reduce at train.py:41`),
    so the rank that is somewhere else stands out. Threads are listed innermost frame first.
    Uses py-spy on the ranks' hosts; docs/hangs.md says how each backend reaches them.

    \b
    Example:
      trainlaunch stack --summary local://trainlaunch/train-x7k2m9p4qa
    """
    import time

    from trainlaunch.errors import UsageError
    from trainlaunch.ranklist import RankRanges, parse_rank_list
    from trainlaunch.runner import get_runner
    from trainlaunch.stacks import values as stacks

    wanted = None
    if ranks is not None:
        try:  # checked now; expanded only up to the ranks the app has (issue 23 #10)
            wanted = RankRanges(ranks)
        except ValueError as e:
            raise UsageError(f"--rank: {e}", hint="e.g. --rank 1 or --rank 0,2-3") from None
    taken = time.time()
    with get_runner() as runner:
        dumped = runner.stacks(handle, native)
    view = None
    if collectives:  # every rank's recorder, before --rank narrows what is shown
        from trainlaunch.stacks.collectives import from_stacks

        view = from_stacks(dumped)
    if ranks is not None and wanted is not None:
        have = {s.rank for s in dumped}
        world = max(have) + 1 if have else 0
        missing = stacks.rank_list(parse_rank_list(ranks, world) - have)
        missing = ",".join(m for m in (missing, wanted.beyond(world)) if m)
        if missing:
            raise UsageError(f"{handle} has no rank {missing}; ranks: {stacks.rank_list(have)}")
        dumped = [s for s in dumped if s.rank in wanted]
    if as_json:
        extra = {"collectives": view.to_dict()} if view is not None else {}
        output.emit_json({"handle": str(handle), **stacks.document(dumped, taken), **extra})
        return
    head = [*view.lines, *([view.unavailable] if view.unavailable else [])] if view else []
    output.emit("\n".join([*head, stacks.render_text(stacks.group(dumped), full=not summary)]))
