"""`trainlaunch stack HANDLE`: where every rank of a running app is, grouped."""

from __future__ import annotations

import click

from trainlaunch.cli import output


@click.command("stack")
@click.argument("handle")
@click.option(
    "--rank", "ranks", default=None, metavar="R,R-R", help="Only these ranks, e.g. 1 or 0,2-3."
)
@click.option("--native", is_flag=True, help="Include C/C++ frames (py-spy --native).")
@click.option("--summary", is_flag=True, help="One line per group, no frames.")
@output.json_option
def command(handle: str, ranks: str | None, native: bool, summary: bool, as_json: bool) -> None:
    """Dump the Python stack of every rank of a running app, all at the same moment.

    Ranks with identical stacks are shown once (`ranks 0,2-3: all_reduce at train.py:41`),
    so the rank that is somewhere else stands out. Threads are listed innermost frame first.
    Uses py-spy on the ranks' hosts (local: directly; Slurm: srun --overlap); docs/hangs.md.
    """
    import time

    from trainlaunch import stacks
    from trainlaunch.errors import UsageError
    from trainlaunch.handles import parse_app_handle
    from trainlaunch.runner import get_runner

    handle = str(parse_app_handle(handle))
    wanted = None
    if ranks is not None:
        try:
            wanted = stacks.parse_rank_list(ranks)
        except ValueError as e:
            raise UsageError(f"--rank: {e}", hint="e.g. --rank 1 or --rank 0,2-3") from None
    taken = time.time()
    with get_runner() as runner:
        dumped = runner.stacks(handle, native)
    if wanted is not None:
        missing = wanted - {s.rank for s in dumped}
        if missing:
            raise UsageError(
                f"{handle} has no rank {stacks.rank_list(missing)}; "
                f"ranks: {stacks.rank_list(s.rank for s in dumped)}"
            )
        dumped = [s for s in dumped if s.rank in wanted]
    if as_json:
        output.emit_json({"handle": handle, **stacks.document(dumped, taken)})
        return
    output.emit(stacks.render_text(stacks.group(dumped), full=not summary))
