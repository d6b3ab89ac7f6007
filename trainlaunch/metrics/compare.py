"""Side-by-side runs: one table row per app (its parameters, last/best of each metric, steps)
and overlay series of one metric, for ``trainlaunch metrics H1 H2 ...`` and ``metrics SWEEP``.

Pure functions over :class:`trainlaunch.metrics.reader.MetricsData`. An app is summarised by
its rank 0 (else its lowest rank): every rank of a data-parallel job logs the same loss.
"Best" is the minimum for metrics named like a loss or an error (``loss``, ``err``, ``perplexity``)
and the maximum otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

from trainlaunch.errors import UsageError
from trainlaunch.metrics import reader as mr
from trainlaunch.values import frozen

LOWER_IS_BETTER = ("loss", "err", "perplexity", "mse", "mae")
MARKS = "*o+x#@%&"  # the chart's markers, in app order


@frozen
class AppMetrics:
    """One app to compare: its handle, its sweep parameters (maybe none), its metrics."""

    handle: str
    params: Mapping[str, Any]
    data: mr.MetricsData


def lower_is_better(metric: str) -> bool:
    """True for loss-like metrics (their best value is the minimum)."""
    return any(word in metric.lower() for word in LOWER_IS_BETTER)


def summary_records(data: mr.MetricsData) -> list[dict[str, Any]]:
    """The records of the rank that stands for the app: rank 0, else the lowest."""
    if not data.records:
        return []
    key = 0 if 0 in data.records else sorted(data.records, key=str)[0]
    return data.records[key]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def summarize(app: AppMetrics, metrics: Sequence[str]) -> dict[str, Any]:
    """One table row: handle, params, steps, and last/best of every metric."""
    records = summary_records(app.data)
    steps = {r["step"] for r in records if isinstance(r.get("step"), int)}
    last: dict[str, float | None] = {}
    best: dict[str, float | None] = {}
    for m in metrics:
        values = [v for r in records if (v := _number(r.get(m))) is not None]
        finite = [v for v in values if math.isfinite(v)]
        last[m] = values[-1] if values else None
        pick = min if lower_is_better(m) else max
        best[m] = pick(finite) if finite else None
    return {
        "handle": app.handle,
        "params": dict(app.params),
        "steps": len(steps),
        "last": last,
        "best": best,
    }


def metric_union(apps: Sequence[AppMetrics]) -> list[str]:
    """Every metric any app logged, sorted."""
    return sorted({m for a in apps for m in mr.metric_names(a.data)})


def compare_rows(apps: Sequence[AppMetrics], metric: str | None = None) -> list[dict[str, Any]]:
    """One row per app (only ``metric`` if given)."""
    names = metric_union(apps)
    if metric is not None:
        if metric not in names:
            raise UsageError(f"no metric {metric!r}; logged metrics: {', '.join(names) or 'none'}")
        names = [metric]
    return [summarize(a, names) for a in apps]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def render_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Tab-separated: handle, each parameter, steps, then last/best per metric."""
    params = list(dict.fromkeys(k for r in rows for k in r["params"]))
    metrics = list(dict.fromkeys(k for r in rows for k in r["last"]))
    head = ["handle", *params, "steps"]
    for m in metrics:
        head += [f"{m}.last", f"{m}.best"]
    lines = ["\t".join(head)]
    for r in rows:
        cells = [r["handle"], *(_cell(r["params"].get(p)) for p in params), str(r["steps"])]
        for m in metrics:
            cells += [_cell(r["last"].get(m)), _cell(r["best"].get(m))]
        lines.append("\t".join(cells))
    return "\n".join(lines)


def overlay_series(
    apps: Sequence[AppMetrics], metric: str, x: str = "step"
) -> list[list[tuple[float, float]]]:
    """Per app (in order), ``(x, value)`` of metric; x is the step or seconds since its start."""
    if x not in ("step", "time"):
        raise UsageError(f"--x must be step or time, got {x!r}")
    out = []
    for app in apps:
        records = summary_records(app.data)
        pts = []
        t0 = next((r["timestamp"] for r in records if _number(r.get("timestamp")) is not None), 0)
        for r in records:
            value = _number(r.get(metric))
            where = _number(r.get("step")) if x == "step" else _number(r.get("timestamp"))
            if value is not None and where is not None:
                pts.append((int(where) if x == "step" else round(where - float(t0), 2), value))
        out.append(pts)
    return out


def label(app: AppMetrics) -> str:
    """How an app is named in a legend: its parameters, else its handle."""
    return " ".join(f"{k}={v}" for k, v in app.params.items()) or app.handle


def chart_styles(apps: Sequence[AppMetrics]) -> list[tuple[int, int]]:
    """Per app, (colour, line style) as indexes in order of first appearance: one colour per
    parameter values (the seed left out), one line style per seed, so that a sweep's points
    of one value read as one family and its seeds as the family's members."""
    colours: dict[str, int] = {}
    seeds: dict[str, int] = {}
    out = []
    for app in apps:
        values = repr(sorted((k, str(v)) for k, v in app.params.items() if k != "seed"))
        if not values.strip("[]"):  # no parameters but the seed: each app its own colour
            values = app.handle
        seed = str(app.params.get("seed"))
        out.append((colours.setdefault(values, len(colours)), seeds.setdefault(seed, len(seeds))))
    return out


def spans_decades(values: Sequence[float], decades: int = 3) -> bool:
    """True when the values are all positive and span more than ``decades`` powers of ten (a
    chart of them needs a log scale: a loss from 3.5 down to 4e-8 is a flat line on a linear one)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite or min(finite) <= 0:
        return False
    return max(finite) / min(finite) > 10.0**decades


def render_overlay(apps: Sequence[AppMetrics], metric: str, x: str = "step") -> str:
    """A plain-ASCII chart of metric with one marker per app, and a legend."""
    series = overlay_series(apps, metric, x)
    if not any(series):
        raise UsageError(f"no app logged metric {metric!r} with a {x}")
    # render_chart draws int keys with markers in key order: app i gets MARKS[i]; its x axis
    # is typed as steps but any number works (seconds for --x time)
    chart = cast("dict[mr.RankKey, list[tuple[int, float]]]", dict(enumerate(series)))
    text = mr.render_chart(chart, title=metric)
    lines = text.splitlines()
    lines[-1] = "  ".join(f"{MARKS[i % len(MARKS)]} {label(a)}" for i, a in enumerate(apps))
    if x == "time":
        lines[-2] = lines[-2].replace("step ", "sec ", 1)
    return "\n".join(lines)


__all__ = [
    "AppMetrics",
    "chart_styles",
    "compare_rows",
    "label",
    "lower_is_better",
    "metric_union",
    "overlay_series",
    "render_overlay",
    "render_table",
    "spans_decades",
    "summarize",
]
