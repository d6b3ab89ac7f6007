"""`trainlaunch metrics HANDLE`: what an app's ranks logged through trainlaunch.rank."""

from __future__ import annotations

import math
from typing import Any

import click

from trainlaunch.cli import argv, output
from trainlaunch.cli.metrics_files import check_image_path, metrics_location, pyplot
from trainlaunch.errors import UsageError

FOLLOW_INTERVAL = 1.0  # seconds between re-reads of the metrics files (the runner's poller)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _doc(handle: str, where: str, data: Any, metric: str | None) -> dict[str, Any]:
    from trainlaunch import metrics_reader as mr

    doc: dict[str, Any] = {
        "handle": handle,
        "path": where,
        "files": data.files,
        "skipped_lines": data.skipped_lines,
        "truncated_lines": data.truncated_lines,
        "skipped_files": data.skipped_files,
        "metrics": mr.metric_names(data),
        "latest": {str(rank): _finite(values) for rank, values in mr.latest_values(data).items()},
    }
    if metric:
        doc["series"] = {
            metric: {
                str(rank): [[s, _finite(v)] for s, v in pts]
                for rank, pts in mr.metric_series(data, metric).items()
            }
        }
    return doc


def _text(data: Any, metric: str | None) -> str:
    from trainlaunch import metrics_reader as mr

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


def _image(data: Any, metric: str, path: str) -> None:
    from trainlaunch import metrics_reader as mr

    series = mr.metric_series(data, metric)
    if not series:  # an empty chart is a mistake (and matplotlib warns about the legend)
        raise UsageError(
            f"no metric {metric!r}; logged metrics: {', '.join(mr.metric_names(data)) or '(none)'}"
        )
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for rank, pts in series.items():
        ax.plot([s for s, _ in pts], [v for _, v in pts], label=f"rank {rank}")
    ax.set_xlabel("step")
    ax.set_ylabel(metric)
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as e:
        raise UsageError(
            f"cannot write --image {path!r}: {getattr(e, 'strerror', None) or e}"
        ) from None
    finally:
        plt.close(fig)


@click.command("metrics")
@click.argument("handle", shell_complete=argv.complete_app_id)
@click.argument("more", nargs=-1, metavar="[HANDLE]...", shell_complete=argv.complete_app_id)
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
    help="Also write a chart of --metric to FILE (png/svg/pdf; needs trainlaunch[plot]).",
)
@output.json_option
def command(
    handle: str,
    more: tuple[str, ...],
    x_axis: str,
    metric: str | None,
    path_: str | None,
    follow: bool,
    image: str | None,
    as_json: bool,
) -> None:
    """Show the latest metric values per exporting rank, and a chart of one metric."""
    from trainlaunch import metrics_reader as mr
    from trainlaunch.handles import parse_app_handle
    from trainlaunch.metrics_summary import read_latest
    from trainlaunch.runner import get_runner
    from trainlaunch.sweep_runs import sweep_id_of

    if more or sweep_id_of(handle):  # compare apps side by side (docs/sweeps.md)
        from trainlaunch.cli import compare_view

        compare_view.show([handle, *more], metric, x_axis, image, as_json)
        return
    # the table alone needs only each rank's latest values: read from the files' ends
    read = mr.read_metrics if metric else read_latest

    if image and not metric:
        raise UsageError("--image needs --metric NAME")
    if image:
        check_image_path(image)
    handle = str(parse_app_handle(handle))
    with get_runner() as runner:
        resp = runner.describe_app(handle)
        where = path_ or runner.metrics_location(handle, resp) or metrics_location(resp)
        if follow:
            from trainlaunch.cli.boundary import raise_on_sigterm

            raise_on_sigterm()
            last = None
            for _ in runner.poll(handle, max_interval=FOLLOW_INTERVAL):
                try:
                    data = read(where)
                    text = _text(data, metric)
                except UsageError:
                    text = "(no metrics yet)"
                if text != last and not as_json:
                    output.emit(text + "\n")
                    last = text
        data = read(where)
    if image and metric:
        _image(data, metric, image)
        output.narrate(f"wrote {image}")
    if as_json:
        output.emit_json(_doc(handle, where, data, metric))
    elif not follow:
        output.emit(_text(data, metric))
