"""The overview: one row per app of the configured backends, live fields for running ones.

A running app is described (state, ranks alive / world, time since progress, stall and hang,
requeues) and its metrics files read from their ends (step, the chosen metric); a finished one
costs its ``list`` row alone. A backend that cannot answer (no Slurm here, no cluster) gives one
note, never an error: the view goes on with the others.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trainlaunch.cli import render
from trainlaunch.cli.board.rates import RateBook
from trainlaunch.errors import TrainlaunchError
from trainlaunch.schedulers.api import DescribeAppResponse, ListAppResponse

if TYPE_CHECKING:
    from trainlaunch.metrics.latest import LatestFiles

FINISHED_SHOWN = 20  # recent finished apps listed under the running ones, per backend


def overview(
    runner: Any,
    backends: Sequence[str],
    rates: RateBook,
    metric: str | None = None,
    finished: int = FINISHED_SHOWN,
    default_metric: bool = False,
    offscreen: Collection[str] = (),
) -> dict[str, Any]:
    """``{"apps": [row...], "notes": [...], "at": unix time}``: running apps first.

    default_metric: without ``metric``, each running app shows the metric its page would
    (a loss if it logs one), named in its row's ``metric``. offscreen: handles of running
    apps a view does not show now: their list row only (``"live": False``), no description
    or metrics read (`top` keeps showing what it read of them last)."""
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for name in backends:
        try:
            listed = runner.list_apps(name)
        except TrainlaunchError as e:
            notes.append(f"{name}: {e}")
            continue
        running = [r for r in listed if not r.state.is_terminal]
        done = [r for r in listed if r.state.is_terminal][:finished]
        rows += [
            _list_row(name, r, live=False)
            if r.app_handle in offscreen
            else app_row(runner, name, r, rates, metric, default_metric)
            for r in running
        ]
        rows += [_list_row(name, r) for r in done]
    return {"apps": rows, "notes": notes, "at": time.time()}


def _list_row(backend: str, r: ListAppResponse, live: bool = True) -> dict[str, Any]:
    row = render.list_doc([r])[0]
    row.update(backend=backend, age_s=_age(r.created), running=not r.state.is_terminal)
    if not live:
        row["live"] = False
    return row


def app_row(
    runner: Any,
    backend: str,
    r: ListAppResponse,
    rates: RateBook,
    metric: str | None,
    default_metric: bool = False,
) -> dict[str, Any]:
    """A running app's row: its list row and what its description and metrics say now."""
    row = _list_row(backend, r)
    try:
        resp = runner.describe_app(r.app_handle)
    except TrainlaunchError as e:  # it ended and went away between list and describe
        row["msg"] = str(e)
        return row
    row.update(live_fields(resp))
    latest = latest_metrics(runner, r.app_handle, resp, rates.files)
    step = _step(latest)
    row["step"] = step
    row["steps_per_s"] = rates.rate(("step", r.app_handle), step)
    if metric is None and default_metric:
        metric = first_metric(sorted({k for v in latest.values() for k in v} - {"step", "epoch"}))
    row["metric"] = metric
    row["metric_value"] = _metric(latest, metric) if metric else None
    return row


def live_fields(resp: DescribeAppResponse) -> dict[str, Any]:
    """State, ranks alive / world, seconds since the freshest rank's progress, flags."""
    st = resp.status
    progress = list(resp.progress or [])
    if progress:
        alive = sum(1 for p in progress if p.get("running"))
        world = len(progress)
        idle = [p["idle_s"] for p in progress if p.get("running") and p.get("idle_s") is not None]
    else:  # no per-rank records (Kubernetes, a plain replica): its replicas stand for it
        replicas = list(st.replicas())
        alive = sum(1 for x in replicas if not x.state.is_terminal)
        world = len(replicas)
        idle = []
    flags = []
    if resp.hang:
        flags.append(f"hang #{resp.hang.get('hangs')}")
    if resp.stall:
        flags.append("stalled" if resp.stall.startswith("stalled") else "straggler")
    if any(p.get("stalled") for p in progress) and "straggler" not in flags:
        flags.append("straggler")
    return {
        "state": st.state.name,
        "ranks_alive": alive,
        "world": world,
        "idle_s": min(idle) if idle else None,
        "stall": resp.stall or None,
        "flags": flags,
        "requeues": st.num_requeues,
        "restarts": st.num_restarts,
        "sweep": _sweep_of(resp),
    }


def latest_metrics(
    runner: Any, handle: str, resp: DescribeAppResponse, files: LatestFiles | None = None
) -> dict[Any, dict]:
    """Per rank, the latest value of each metric (read from the files' ends; {} if none);
    with ``files`` (a view's memory), only what was appended since its last reading."""
    from trainlaunch.metrics.reader import latest_values
    from trainlaunch.metrics.summary import read_latest

    try:
        where = runner.metrics_location(handle, resp)
        if where is None:
            return {}
        return latest_values(files.read(where) if files is not None else read_latest(where))
    except (TrainlaunchError, OSError):  # none logged yet, or out of reach from here
        return {}


def first_metric(names: Sequence[str]) -> str | None:
    """``loss`` if logged, else another loss (what people look at first), else the first."""
    if "loss" in names:
        return "loss"
    return next((n for n in names if "loss" in n.lower()), names[0] if names else None)


def _step(latest: Mapping[Any, Mapping[str, Any]]) -> int | None:
    steps = [v.get("step") for v in latest.values()]
    ints = [s for s in steps if isinstance(s, int) and not isinstance(s, bool)]
    return max(ints) if ints else None


def _metric(latest: Mapping[Any, Mapping[str, Any]], metric: str) -> Any:
    """The metric as rank 0 (else the lowest rank that logged it) has it now."""
    for rank in sorted(latest, key=lambda k: (not isinstance(k, int), str(k))):
        if metric in latest[rank]:
            return latest[rank][metric]
    return None


def _sweep_of(resp: DescribeAppResponse) -> str | None:
    from trainlaunch.sweeps.record import point_of

    tag = point_of(resp.app.metadata if resp.app else {})
    sweep = tag.get("sweep")
    return str(sweep) if sweep else None


def _age(created: float | None) -> float | None:
    return None if not created else max(0.0, time.time() - created)


__all__ = ["app_row", "first_metric", "latest_metrics", "live_fields", "overview"]
