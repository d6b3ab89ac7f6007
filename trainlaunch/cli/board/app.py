"""One app as `top` and `ui` show it: its status and describe documents (secrets masked, as
``describe`` prints them), a table of its ranks (progress, step, rate, CPU, memory, GPU, last
line), its metrics (names, latest per rank, one metric's series per rank) and its log tail."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainlaunch.cli import render
from trainlaunch.cli.board import gpus as gpu_usage
from trainlaunch.cli.board.apps import first_metric, latest_metrics, live_fields
from trainlaunch.cli.board.logtail import tail
from trainlaunch.cli.board.rates import RateBook
from trainlaunch.errors import TrainlaunchError
from trainlaunch.metrics.reader import json_safe
from trainlaunch.node.usage import usage
from trainlaunch.schedulers.api import DescribeAppResponse

SERIES_POINTS = 2000  # per rank: a longer series is thinned evenly (its last point kept)


def app_view(
    runner: Any,
    handle: str,
    rates: RateBook,
    metric: str | None = None,
    log_lines: int = 100,
    ranks: frozenset[int] | None = None,
    series: bool = True,
) -> dict[str, Any]:
    """Everything one app's page shows (AppNotFound: no such app); series=False leaves the
    metric's series out (a view that draws no chart reads no whole metrics file)."""
    resp = runner.describe_app(handle)
    latest = latest_metrics(runner, handle, resp, rates.files)
    try:
        logs = tail(runner, handle, resp, log_lines, ranks=ranks)
        logs_note = ""
    except TrainlaunchError as e:  # a backend without logs, an app with no record of its roles
        logs, logs_note = [], str(e)
    devices = gpu_usage.gpus()
    return {
        "handle": handle,
        "live": live_fields(resp),
        "status": render.status_doc(handle, resp),
        "history": [list(r) for r in render.attempt_rows(resp.status)],
        "describe": render.describe_doc(handle, resp),
        "ranks": rank_rows(handle, resp, latest, rates, logs, gpu_usage.by_pid(devices)),
        "gpus": devices,
        "metrics": metrics_doc(runner, handle, resp, latest, metric, series),
        "logs": logs,
        "logs_note": logs_note,
    }


def rank_rows(
    handle: str,
    resp: DescribeAppResponse,
    latest: Mapping[Any, Mapping[str, Any]],
    rates: RateBook,
    logs: list[dict[str, Any]],
    on_gpu: Mapping[int, Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """One row per rank: progress, step and steps/s, CPU % and RSS, GPU, its last log line."""
    last_line = _last_lines(logs)
    rows = []
    for p in resp.progress or []:
        rank, pid = p["rank"], p.get("pid")
        step = (latest.get(rank) or {}).get("step")
        use = usage(pid) if p.get("running") else None
        cpu = rates.rate(("cpu", handle, rank, pid), use.cpu_s if use else None)
        rows.append(
            {
                **p,
                "step": step if isinstance(step, int) else None,
                "steps_per_s": rates.rate(("step", handle, rank), _num(step)),
                "cpu_percent": None if cpu is None else round(cpu * 100, 1),
                "rss": use.rss if use else None,
                "gpu": dict(on_gpu[pid]) if pid is not None and pid in on_gpu else None,
                "last_line": last_line.get(rank, ""),
            }
        )
    return rows


def metrics_doc(
    runner: Any,
    handle: str,
    resp: DescribeAppResponse,
    latest: Mapping[Any, Mapping[str, Any]],
    metric: str | None,
    series_too: bool = True,
) -> dict[str, Any]:
    """The metric names, each rank's latest values and, for ``metric``, its series per rank
    (``{}`` unless series_too)."""
    names = sorted({k for v in latest.values() for k in v if k not in ("step", "epoch")})
    chosen = metric if metric in names else (first_metric(names) if metric is None else None)
    series: dict[str, list[list[float]]] = {}
    if chosen and series_too:
        from trainlaunch.metrics import reader as mr

        try:
            where = runner.metrics_location(handle, resp)
            data = mr.read_metrics(where) if where else None
        except (TrainlaunchError, OSError):
            data = None
        if data is not None:
            for rank, pts in mr.metric_series(data, chosen).items():
                series[str(rank)] = [[s, json_safe(v)] for s, v in _thin(pts)]
    return {
        "names": names,
        "metric": chosen,
        "latest": {str(k): json_safe(dict(v)) for k, v in latest.items()},
        "series": series,
    }


def _thin(pts: list[tuple[int, float]]) -> list[tuple[int, float]]:
    if len(pts) <= SERIES_POINTS:
        return pts
    step = len(pts) / SERIES_POINTS
    return [pts[int(i * step)] for i in range(SERIES_POINTS - 1)] + [pts[-1]]


def _last_lines(logs: list[dict[str, Any]]) -> dict[int, str]:
    out: dict[int, str] = {}
    for d in logs:
        for rank in d.get("ranks") or ([d["rank"]] if d.get("rank") is not None else []):
            if d.get("line"):
                out[rank] = d["line"]
    return out


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


__all__ = ["app_view", "metrics_doc", "rank_rows"]
