"""`trainlaunch top [HANDLE]`: the board's documents, live in a Textual view or as one frame."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from trainlaunch.cli import output
from trainlaunch.cli.backends import names, scheduler_option
from trainlaunch.cli.handles import HANDLE
from trainlaunch.handles import Handle

ONCE_WINDOW_S = 1.0  # --once reads a running app twice, this far apart: steps/s and CPU %


@click.command("top")
@click.argument("handle", type=HANDLE, required=False)
@scheduler_option(
    lambda: (
        f"Backend to watch, repeatable: {', '.join(names())} (default: local, the config's "
        "[run] scheduler and every scheduler the config has a table for)."
    ),
    many=True,
)
@click.option(
    "--metric", metavar="NAME", default=None, help="The metric column (default: a loss if logged)."
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0, min_open=True),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="Refresh every SECONDS.",
)
@click.option(
    "--once",
    is_flag=True,
    help="Print one frame as plain text and exit (also when stdout is not a terminal).",
)
@output.json_option
def command(
    handle: Handle | None,
    schedulers: tuple[str, ...],
    metric: str | None,
    interval: float,
    once: bool,
    as_json: bool,
) -> None:
    """Watch the running and recent apps live: state, ranks alive, step, steps/s, a metric,
    time since progress, hang and straggler flags. Enter shows an app's ranks and newest log
    lines; keys for its stacks, logs, describe and (after a confirmation) stop; ? lists them.

    With HANDLE, start on that app (or sweep). Read-only unless you confirm a stop. Needs
    textual on a terminal (pip install 'trainlaunch[top]'); --once and --json need only rich.

    \b
    Example:
      trainlaunch top --once -s local --metric loss
    """
    backends = _backends(schedulers)
    if once or as_json or not output.stdout_is_tty():
        _print_frame(handle, backends, metric, as_json)
        return
    from trainlaunch.cli import extras
    from trainlaunch.errors import UsageError

    try:
        extras.require("top", ["textual"], "`trainlaunch top` on a terminal")
    except UsageError as e:
        hint = f"{e.hint}; or `trainlaunch top --once` (rich alone)"
        raise UsageError(e.message, hint=hint) from None
    from trainlaunch.cli.top.app import Top
    from trainlaunch.runner import get_runner

    with get_runner() as runner:
        top = Top(runner, backends, metric, interval, str(handle) if handle else None)
        top.run()
    if top.return_code == Top.INTERRUPTED:
        raise KeyboardInterrupt


def _backends(schedulers: Sequence[str]) -> list[str]:
    """The backends asked for (an unknown one: a usage error with a did-you-mean), else the
    configured ones."""
    from trainlaunch.schedulers import canonical_name

    if schedulers:
        return list(dict.fromkeys(canonical_name(s) for s in schedulers))
    from trainlaunch.config import load_config

    return load_config().configured_schedulers()


def _print_frame(
    handle: Handle | None, backends: list[str], metric: str | None, as_json: bool
) -> None:
    """One frame: the overview (or HANDLE's app or sweep) as text or JSON."""
    import time

    from trainlaunch.cli.board.rates import RateBook
    from trainlaunch.cli.top import frame
    from trainlaunch.handles import SweepHandle
    from trainlaunch.runner import get_runner

    rates = RateBook()
    with get_runner() as runner:
        if isinstance(handle, SweepHandle):
            from trainlaunch.cli.board.sweep import sweep_view

            doc = sweep_view(runner, str(handle), metric)
            text = frame.sweep_text(doc)
        elif handle is not None:
            doc = _twice(lambda: _app(runner, str(handle), rates, metric), _app_running)
            text = frame.app_text(doc)
        else:
            doc = _twice(lambda: _overview(runner, backends, rates, metric), _any_running)
            text = frame.overview_text(doc, doc["sweeps"], time.time())
    if as_json:
        output.emit_json(doc)
    elif handle is None and not doc["apps"] and not doc["notes"]:
        output.narrate(f"no apps on {', '.join(backends)} (start one: trainlaunch run ...)")
        output.emit(text)
    else:
        output.emit(text)


def _overview(runner: Any, backends: list[str], rates: Any, metric: str | None) -> dict:
    from trainlaunch.cli.board.apps import overview
    from trainlaunch.cli.board.sweep import sweeps

    doc = overview(runner, backends, rates, metric, default_metric=True)
    doc["sweeps"] = sweeps()
    return doc


def _app(runner: Any, handle: str, rates: Any, metric: str | None) -> dict:
    from trainlaunch.cli.board.app import app_view

    return app_view(runner, handle, rates, metric, log_lines=200, series=False)


def _any_running(doc: dict) -> bool:
    return any(r.get("running") for r in doc["apps"])


def _app_running(doc: dict) -> bool:
    return any(r.get("running") for r in doc["ranks"])


def _twice(read: Any, running: Any) -> dict:
    """A reading, and a second one a moment later when something runs (rates need two)."""
    import time

    doc = read()
    if running(doc):
        time.sleep(ONCE_WINDOW_S)  # a sampling window, as `top -b -n 1` has; not a wait
        doc = read()
    return dict(doc)
