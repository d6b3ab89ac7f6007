"""A sweep as `top` and `ui` show it: each point's parameters, state and metrics (last and best,
as ``metrics SWEEP`` compares them), and one metric's series per point for overlay charts."""

from __future__ import annotations

from typing import Any

from trainlaunch.cli.board.apps import first_metric
from trainlaunch.errors import TrainlaunchError
from trainlaunch.metrics.reader import json_safe


def sweeps(limit: int = 50) -> list[dict[str, Any]]:
    """The newest sweeps of this app store: id, handle, component, points, created."""
    from trainlaunch.sweeps.record import list_sweeps

    return list_sweeps(limit)


def sweep_view(runner: Any, handle: str, metric: str | None = None) -> dict[str, Any]:
    """The sweep's points with their metrics (AppNotFound: no such sweep)."""
    from trainlaunch.metrics import compare
    from trainlaunch.metrics import reader as mr

    desc = runner.describe_sweep(handle)
    apps, rows = [], []
    for p in desc.points:
        row = {**p.to_dict(), "label": p.label}  # how legends name it
        data = mr.MetricsData()
        if p.handle and p.resp is not None:
            try:
                where = runner.metrics_location(p.handle, p.resp)
                data = mr.read_metrics(where) if where else data
            except (TrainlaunchError, OSError) as e:
                row["metrics_note"] = str(e)
        params = dict(p.params) | ({"seed": p.seed} if p.seed is not None else {})
        apps.append(compare.AppMetrics(p.handle or f"#{p.index}", params, data))
        rows.append(row)
    names = compare.metric_union(apps)
    chosen = metric if metric in names else first_metric(names)
    for row, app in zip(rows, apps, strict=True):
        summary = compare.summarize(app, names)
        row.update(steps=summary["steps"], last=summary["last"], best=summary["best"])
    series = compare.overlay_series(apps, chosen) if chosen else [[] for _ in apps]
    return {
        "handle": str(desc.handle),
        "component": desc.component,
        "args": list(desc.args),
        "max_parallel": desc.max_parallel,
        "created": desc.created,
        "params": list(dict.fromkeys(k for r in rows for k in r["params"])),
        "metrics": names,
        "metric": chosen,
        "lower_is_better": {n: compare.lower_is_better(n) for n in names},
        "points": json_safe(rows),
        "series": {
            str(r["index"]): json_safe([list(pt) for pt in pts])
            for r, pts in zip(rows, series, strict=True)
        },
    }


__all__ = ["sweep_view", "sweeps"]
