"""`trainlaunch metrics H1 H2 ...` / `metrics SWEEP`: one table and overlay charts."""

from __future__ import annotations

import math
from typing import Any

from trainlaunch.cli import output
from trainlaunch.errors import UsageError


def load(handles: list[str]) -> list[Any]:
    """AppMetrics for every app the handles name (a sweep stands for its points)."""
    from trainlaunch import compare, sweep_runs
    from trainlaunch import metrics_reader as mr
    from trainlaunch.cli.metrics_files import metrics_location
    from trainlaunch.runner import get_runner

    apps = []
    with get_runner() as runner:
        for text in handles:
            for handle in sweep_runs.expand_handle(text):
                resp = runner.describe_app(handle)
                point = sweep_runs.point_of(resp.app.metadata if resp.app else {}).get("point")
                params = dict((point or {}).get("params") or {})
                if (point or {}).get("seed") is not None:
                    params["seed"] = point["seed"]  # type: ignore[index]
                where = runner.metrics_location(handle, resp) or metrics_location(resp)
                data = mr.read_metrics(where)
                apps.append(compare.AppMetrics(handle, params, data))
    return apps


def show(handles: list[str], metric: str | None, x: str, image: str | None, as_json: bool) -> None:
    """Print the comparison table (and the overlay chart of --metric)."""
    from trainlaunch import compare
    from trainlaunch.cli.metrics_files import check_image_path

    if image and not metric:
        raise UsageError("--image needs --metric NAME")
    if image:
        check_image_path(image)
    apps = load(handles)
    rows = compare.compare_rows(apps, metric)
    if image and metric:
        _image(apps, metric, x, image)
        output.narrate(f"wrote {image}")
    if as_json:
        doc: dict[str, Any] = {"apps": _finite(rows)}
        if metric:
            doc["series"] = {
                a.handle: [[p, _finite(v)] for p, v in pts]
                for a, pts in zip(apps, compare.overlay_series(apps, metric, x), strict=True)
            }
        output.emit_json(doc)
        return
    text = compare.render_table(rows)
    if metric:
        text += "\n\n" + compare.render_overlay(apps, metric, x)
    output.emit(text)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _image(apps: list[Any], metric: str, x: str, path: str) -> None:
    from trainlaunch import compare
    from trainlaunch.cli.metrics_files import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for app, pts in zip(apps, compare.overlay_series(apps, metric, x), strict=True):
        ax.plot([p for p, _ in pts], [v for _, v in pts], label=compare.label(app))
    ax.set_xlabel("step" if x == "step" else "seconds")
    ax.set_ylabel(metric)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
