"""`trainlaunch doctor`: this machine, checked, in one table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from trainlaunch.cli import output

if TYPE_CHECKING:
    from trainlaunch.doctor.values import Check


@click.command("doctor")
@click.option("--strict", is_flag=True, help="Exit 1 on a warning too, not only on a failure.")
@click.option(
    "--python",
    default=None,
    metavar="PATH",
    help="The ranks' interpreter to check (default: dist.ddp's: the config's, else this one).",
)
@output.json_option
def command(strict: bool, python: str | None, as_json: bool) -> None:
    """Check that this machine can run trainlaunch's jobs, one line per check with a fix.

    Python and torch (asked of the ranks' interpreter), CUDA, NCCL, each GPU's health, the
    limits (/dev/shm, open files, processes), the app store, py-spy, a rendezvous port, and
    the clusters this machine is set up for. Exit 0 unless a check failed (1); with --strict, a
    warning is 1 too.

    \b
    Example:
      trainlaunch doctor
    """
    import os

    from trainlaunch.config import load_config
    from trainlaunch.doctor.checks import run_all
    from trainlaunch.doctor.values import Status, counts
    from trainlaunch.errors import ChecksFailed

    checks = run_all(load_config(), os.environ, python)
    n = counts(checks)
    if as_json:
        output.emit_json(
            {"ok": n["fail"] == 0, "counts": n, "checks": [c.to_dict() for c in checks]}
        )
    else:
        output.emit(render(checks))
        output.narrate(
            f"doctor: {n['ok']} ok, {n['warn']} warning(s), {n['fail']} failed, {n['skip']} skipped"
        )
    bad = [c for c in checks if c.status == Status.FAIL or (strict and c.status == Status.WARN)]
    if bad:
        what = "failed" if any(c.status == Status.FAIL for c in bad) else "warned (--strict)"
        raise ChecksFailed(
            f"{len(bad)} check(s) {what}: {', '.join(dict.fromkeys(c.name for c in bad))}",
            hint="each line's fix says what to do",
        )


def render(checks: Sequence[Check]) -> str:
    """The table: check, status, detail; a fix line under each warning or failure."""
    width = max(len(c.name) for c in checks)
    lines = [f"{'check'.ljust(width)}  status  detail"]
    for c in checks:
        lines.append(f"{c.name.ljust(width)}  {c.status.value.ljust(6)}  {c.detail}")
        if c.fix:
            lines.append(f"{''.ljust(width)}          fix: {c.fix}")
    return "\n".join(lines)
