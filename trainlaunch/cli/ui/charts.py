"""The page's charts, each drawn (svg.py) from a board document: one app's metric with a line
per rank, a sweep's metric with a line per point, a sweep's parameter against a metric."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainlaunch.cli.ui import svg


def app_chart(
    runner: Any,
    handle: str,
    log: bool = False,
    metric: str | None = None,
    ranks: frozenset[int] | None = None,
    param: str | None = None,
    which: str | None = None,
) -> str:
    """The app's metric (its board default: a loss) over steps, one line per rank."""
    from trainlaunch.cli.board.app import metrics_doc
    from trainlaunch.cli.board.apps import latest_metrics

    resp = runner.describe_app(handle)
    doc = metrics_doc(runner, handle, resp, latest_metrics(runner, handle, resp), metric)
    series = sorted(doc["series"].items(), key=lambda kv: _rank_order(kv[0]))
    lines = [
        svg.Line(f"rank {k}", pts)
        for k, pts in series
        if ranks is None or _rank_order(k)[1] in ranks
    ]
    if doc["metric"]:
        title = doc["metric"] + (" (log)" if log else "")
    else:
        title = f"no metric {metric!r}" if metric else "no metrics logged yet"
    return svg.line_chart(lines, title=title, log_y=log)


def sweep_chart(
    runner: Any,
    handle: str,
    log: bool = False,
    metric: str | None = None,
    ranks: frozenset[int] | None = None,
    param: str | None = None,
    which: str | None = None,
) -> str:
    """The sweep's metric over steps, one line per point (named by its parameters)."""
    from trainlaunch.cli.board.sweep import sweep_view

    doc = sweep_view(runner, handle, metric)
    lines = [
        svg.Line(point_label(p), doc["series"].get(str(p["index"]), [])) for p in doc["points"]
    ]
    title = (doc["metric"] or "no metrics logged yet") + (" (log)" if log and doc["metric"] else "")
    return svg.line_chart(lines, title=title, log_y=log)


def scatter_chart(
    runner: Any,
    handle: str,
    log: bool = False,
    metric: str | None = None,
    ranks: frozenset[int] | None = None,
    param: str | None = None,
    which: str | None = None,
) -> str:
    """One dot per point: a parameter (or the seed) against the metric's last or best value."""
    from trainlaunch.cli.board.sweep import sweep_view

    doc = sweep_view(runner, handle, metric)
    params: list[str] = [*doc["params"], "seed"]
    param = param if param in params else params[0]
    which = which if which in ("last", "best") else "last"
    chosen = doc["metric"]
    dots = [
        svg.Dot(
            p.get("seed") if param == "seed" else p["params"].get(str(param)),
            (p.get(which) or {}).get(chosen) if chosen else None,
            point_label(p),
        )
        for p in doc["points"]
    ]
    title = f"{chosen} ({which}) against {param}" if chosen else "no metrics logged yet"
    return svg.scatter(dots, title=title, x_label=str(param), y_label=chosen or "", log_y=log)


def point_label(point: dict[str, Any]) -> str:
    """A sweep point's name in a legend: its board row's label (``lr=0.1 seed=2``, the
    sweep's own rule), ``#3`` for a point without parameters."""
    return str(point.get("label") or f"#{point.get('index')}")


def _rank_order(key: str) -> tuple[int, int]:
    return (0, int(key)) if key.lstrip("-").isdigit() else (1, -1)


KINDS: dict[str, Callable[..., str]] = {
    "app": app_chart,
    "sweep": sweep_chart,
    "scatter": scatter_chart,
}

__all__ = ["KINDS", "app_chart", "point_label", "scatter_chart", "sweep_chart"]
