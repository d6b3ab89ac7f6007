"""`trainlaunch metrics HANDLE`: what an app's ranks logged through trainlaunch.rank."""

from __future__ import annotations

import functools
from typing import Any

import click

from trainlaunch.cli import output
from trainlaunch.cli.handles import HANDLE
from trainlaunch.cli.metrics_files import check_image_path, pyplot, read_own, save_chart
from trainlaunch.errors import UsageError
from trainlaunch.handles import Handle
from trainlaunch.metrics.reader import json_safe
from trainlaunch.schedulers.api import DescribeAppResponse
from trainlaunch.sweeps.status import SweepDescription
from trainlaunch.values import frozen

FOLLOW_INTERVAL = 1.0  # seconds between re-reads of the metrics files (the runner's poller)


def _doc(
    handle: str, where: str, data: Any, metric: str | None, note: str | None = None
) -> dict[str, Any]:
    from trainlaunch.metrics import reader as mr

    doc: dict[str, Any] = {
        "handle": handle,
        "path": where,
        "note": note,  # why there is nothing to show: no metrics logged (yet)
        "files": data.files,
        "skipped_lines": data.skipped_lines,
        "truncated_lines": data.truncated_lines,
        "skipped_files": data.skipped_files,
        "metrics": mr.metric_names(data),
        "latest": {str(rank): json_safe(values) for rank, values in mr.latest_values(data).items()},
    }
    if metric:
        doc["series"] = {
            metric: {
                str(rank): [[s, json_safe(v)] for s, v in pts]
                for rank, pts in mr.metric_series(data, metric).items()
            }
        }
    return doc


def _text(data: Any, metric: str | None) -> str:
    from trainlaunch.metrics import reader as mr

    latest = mr.latest_values(data)
    names = mr.metric_names(data)
    lines = ["rank\tstep\t" + "\t".join(names)]
    for rank, values in latest.items():
        cells = [
            f"{values.get(n):.6g}" if isinstance(values.get(n), float) else str(values.get(n, ""))
            for n in names
        ]
        lines.append(f"{rank}\t{values.get('step', '')}\t" + "\t".join(cells))
    if metric:
        series = mr.metric_series(data, metric)
        if not series:
            raise UsageError(f"no metric {metric!r}; logged metrics: {', '.join(names)}")
        lines += ["", mr.render_chart(series, title=metric)]
    if data.truncated_lines or data.skipped_lines:
        lines.append(
            f"(ignored {data.skipped_lines} unparseable or malformed and "
            f"{data.truncated_lines} truncated lines)"
        )
    for path in data.skipped_files:
        lines.append(f"(ignored {path}: not a regular file)")
    return "\n".join(lines)


def _image(data: Any, metric: str, path: str, log_y: bool) -> None:
    from trainlaunch.metrics import reader as mr

    series = mr.metric_series(data, metric)
    if not series:  # an empty chart is a mistake (and matplotlib warns about the legend)
        raise UsageError(
            f"no metric {metric!r}; logged metrics: {', '.join(mr.metric_names(data)) or '(none)'}"
        )
    fig, ax = pyplot().subplots(figsize=(8, 4.5))
    for rank, pts in series.items():
        ax.plot([s for s, _ in pts], [v for _, v in pts], label=f"rank {rank}")
    ax.set_xlabel("step")
    ax.set_ylabel(metric)
    save_chart(fig, ax, path, [v for pts in series.values() for _, v in pts], log_y)


@click.command("metrics")
@click.argument("handle", type=HANDLE)
@click.argument("more", nargs=-1, metavar="[HANDLE]...", type=HANDLE)
@click.option(
    "--x", "x_axis", type=click.Choice(["step", "time"]), default="step", help="Chart x axis."
)
@click.option("--metric", default=None, help="Chart this metric over steps.")
@click.option(
    "--path",
    "path_",
    default=None,
    help="Read these metrics files (dir, file or glob) instead of the app's.",
)
@click.option("-f", "--follow", is_flag=True, help="Refresh until the app ends.")
@click.option(
    "--image",
    default=None,
    metavar="FILE",
    help="Also write a chart of --metric to FILE (png/svg/pdf; needs matplotlib).",
)
@click.option(
    "--log-y",
    is_flag=True,
    help="Log y scale in the --image chart (automatic when values span over 3 decades).",
)
@output.json_option
def command(
    handle: Handle,
    more: tuple[Handle, ...],
    x_axis: str,
    metric: str | None,
    path_: str | None,
    follow: bool,
    image: str | None,
    log_y: bool,
    as_json: bool,
) -> None:
    """Show the latest metric values per exporting rank, and a chart of one metric; for
    several apps, or a sweep's points, one row per app and overlaid charts.

    \b
    Example:
      trainlaunch metrics local://trainlaunch/train-x7k2m9p4qa --metric loss
    """
    from trainlaunch.runner import get_runner

    if image and not metric:
        raise UsageError("--image needs --metric NAME")
    if image:
        check_image_path(image)
    if more:  # compare apps side by side (docs/sweeps.md)
        from trainlaunch.cli import compare_view

        compare_view.show([handle, *more], metric, x_axis, image, as_json, log_y)
        return
    ask = Ask(metric, x_axis, path_, follow, image, as_json, log_y)
    with get_runner() as runner:
        _show(runner.describe_handle(handle), runner, handle, ask)


@frozen
class Ask:
    """What the command line asks of the metrics."""

    metric: str | None
    x_axis: str
    path: str | None
    follow: bool
    image: str | None
    as_json: bool
    log_y: bool = False


@functools.singledispatch
def _show(desc: object, runner: Any, handle: Handle, ask: Ask) -> None:
    raise TypeError(f"no metrics view of {type(desc).__name__}")


@_show.register
def _(desc: SweepDescription, runner: Any, handle: Handle, ask: Ask) -> None:
    from trainlaunch.cli import compare_view  # a sweep: its points side by side

    compare_view.show([handle], ask.metric, ask.x_axis, ask.image, ask.as_json, ask.log_y)


@_show.register
def _(resp: DescribeAppResponse, runner: Any, handle: Handle, ask: Ask) -> None:
    metric, follow, image, as_json = ask.metric, ask.follow, ask.image, ask.as_json
    from trainlaunch.metrics import reader as mr
    from trainlaunch.metrics.location import require
    from trainlaunch.metrics.summary import read_latest

    # the table alone needs only each rank's latest values: read from the files' ends
    read = mr.read_metrics if metric else read_latest
    where = ask.path or require(resp.app_id, runner.metrics_location(handle, resp))
    if follow:
        from trainlaunch.cli.boundary import raise_on_sigterm

        raise_on_sigterm()
        last = None
        for polled in runner.poll(handle, max_interval=FOLLOW_INTERVAL):
            if isinstance(polled, DescribeAppResponse):  # its state, for the note below
                resp = polled
            try:
                data = read(where)
                text = _text(data, metric)
            except UsageError:
                text = "(no metrics yet)"
            if text != last and not as_json:
                output.emit(text + "\n")
                last = text
    if ask.path:  # the user's path: nothing there is a mistake in the argument
        data, note = read(where), None
    else:  # the app's own: nothing there says something about the app (docs/cli.md)
        data, note = read_own(read, where, resp.state, str(handle))
    if note:
        output.narrate(f"note: {note}" + (f"; no chart written to {image}" if image else ""))
    elif image and metric:
        _image(data, metric, image, ask.log_y)
        output.narrate(f"wrote {image}")
    if as_json:
        output.emit_json(_doc(str(handle), where, data, metric, note))
    elif not follow and not note:
        output.emit(_text(data, metric))
