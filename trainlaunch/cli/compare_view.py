"""`trainlaunch metrics H1 H2 ...` / `metrics SWEEP`: one table and overlay charts."""

from __future__ import annotations

from typing import Any

from trainlaunch.cli import output
from trainlaunch.handles import Handle, parse_handle
from trainlaunch.metrics.reader import json_safe


def load(handles: list[Handle]) -> list[Any]:
    """AppMetrics for every app the handles name (a sweep stands for its points)."""
    from trainlaunch.cli.metrics_files import read_own
    from trainlaunch.metrics import compare
    from trainlaunch.metrics import reader as mr
    from trainlaunch.metrics.location import require
    from trainlaunch.runner import get_runner

    apps = []
    with get_runner() as runner:
        for given in handles:
            for text in runner.apps(given):  # a sweep: its submitted points, in order
                handle = parse_handle(text)  # once: the value travels on
                resp = runner.describe_app(handle)
                where = require(resp.app_id, runner.metrics_location(handle, resp))
                data, note = read_own(mr.read_metrics, where, resp.state, text)
                if note:  # a point that logged nothing (yet) is a row without values
                    output.narrate(f"note: {note}")
                apps.append(compare.AppMetrics(text, params_of(resp), data))
    return apps


def params_of(resp: Any) -> dict[str, Any]:
    """What tells an app apart from the others: its sweep point's parameters and its seed (a
    sweep point's, else the one its ranks got, recorded in its settings: runs of one command
    that differ only by seed are told apart by it)."""
    from trainlaunch.sweeps.record import point_of

    point = point_of(resp.app.metadata if resp.app else {}).get("point") or {}
    params = dict(point.get("params") or {})
    seed = point.get("seed")
    if seed is None:
        seed = resp.settings.get("seed")
    if seed is not None:
        params["seed"] = seed
    return params


def show(
    handles: list[Handle],
    metric: str | None,
    x: str,
    image: str | None,
    as_json: bool,
    log_y: bool = False,
) -> None:
    """Print the comparison table (and the overlay chart of --metric; --image checked)."""
    from trainlaunch.metrics import compare

    apps = load(handles)
    rows = compare.compare_rows(apps, metric)
    if image and metric:
        _image(apps, metric, x, image, log_y)
        output.narrate(f"wrote {image}")
    if as_json:
        doc: dict[str, Any] = {"apps": json_safe(rows)}
        if metric:
            doc["series"] = {
                a.handle: [[p, json_safe(v)] for p, v in pts]
                for a, pts in zip(apps, compare.overlay_series(apps, metric, x), strict=True)
            }
        output.emit_json(doc)
        return
    text = compare.render_table(rows)
    if metric:
        text += "\n\n" + compare.render_overlay(apps, metric, x)
    output.emit(text)


LINE_STYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))  # one per seed


def _image(apps: list[Any], metric: str, x: str, path: str, log_y: bool) -> None:
    """The overlay chart: one colour per parameter values, one line style per seed."""
    from trainlaunch.cli.metrics_files import pyplot, save_chart
    from trainlaunch.metrics import compare

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    palette = plt.get_cmap("tab10" if len(apps) <= 10 else "tab20").colors
    series = compare.overlay_series(apps, metric, x)
    styles = compare.chart_styles(apps)
    for app, pts, (colour, style) in zip(apps, series, styles, strict=True):
        ax.plot(
            [p for p, _ in pts],
            [v for _, v in pts],
            label=compare.label(app),
            color=palette[colour % len(palette)],
            linestyle=LINE_STYLES[style % len(LINE_STYLES)],
        )
    ax.set_xlabel("step" if x == "step" else "seconds")
    ax.set_ylabel(metric)
    save_chart(fig, ax, path, [v for pts in series for _, v in pts], log_y, steps=x == "step")
