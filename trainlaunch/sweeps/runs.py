"""Sweeps, the side with effects: plan every point through the Runner, submit, record, expand.

A sweep is recorded in ``$TRAINLAUNCH_HOME/sweeps/<id>/sweep.json`` (atomic writes) whatever
its scheduler; its handle is ``<scheduler>://<session>/sweep:<id>`` (or ``sweep:<id>``), which
:func:`expand_handle` turns into the handles of its apps. See docs/sweeps.md.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainlaunch import settings, store, sweeps
from trainlaunch.errors import AppNotFound, StoreError, UsageError
from trainlaunch.handles import AppHandle, make_app_handle, parse_app_handle
from trainlaunch.runner import Runner
from trainlaunch.specs import AppDryRunInfo, CfgVal

RECORD = "sweep.json"


@dataclasses.dataclass(frozen=True)
class SweepPlan:
    """A sweep ready to submit: one dry-run per point."""

    sweep_id: str
    scheduler: str
    component: str
    args: tuple[str, ...]
    max_parallel: int | None
    points: tuple[sweeps.SweepPoint, ...]
    infos: tuple[AppDryRunInfo, ...]
    array: AppDryRunInfo | None = None  # all points as one job array (Slurm), if possible
    array_note: str = ""  # why the points are not one array, on a backend that has arrays


def sweep_dir(sweep_id: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where a sweep's record and slot locks live."""
    root = store.ensure_private_dir(store.store_root(environ))
    return store.ensure_private_dir(root / "sweeps") / sweeps.check_sweep_id(sweep_id)


def sweep_handle(scheduler: str, session: str, sweep_id: str) -> str:
    """``scheduler://session/sweep:ID``."""
    return make_app_handle(scheduler, session, sweeps.SWEEP_PREFIX + sweep_id)


def plan_sweep(
    runner: Runner,
    component: str,
    args: Sequence[str],
    points: Sequence[sweeps.SweepPoint],
    scheduler: str,
    cfg: Mapping[str, CfgVal],
    rank_settings: settings.RankSettings,
    max_parallel: int | None = None,
    sweep_id: str | None = None,
) -> SweepPlan:
    """Resolve the component once per point (args substituted) and dry-run each (pure)."""
    if max_parallel is not None and max_parallel < 1:
        raise UsageError(f"--max-parallel must be >= 1, got {max_parallel}")
    sid = sweep_id or sweeps.new_sweep_id()
    names = sorted({n for p in points for n in p.values()})
    sweeps.check_placeholders(args, names)
    infos = []
    for point in points:
        app = runner.build_component(component, sweeps.substitute(args, point.values()))
        tag: dict[str, Any] = {"sweep": sid, "point": point.to_dict()}
        if max_parallel is not None:
            tag["max_parallel"] = max_parallel
        meta = dict(app.metadata)
        meta["trainlaunch"] = {**dict(meta.get("trainlaunch") or {}), **tag}
        rs = rank_settings
        if point.seed is not None:
            rs = settings.RankSettings(**{**rank_settings.to_dict(), "seed": point.seed})
        infos.append(runner.dryrun(app.replace(metadata=meta), scheduler, cfg, rs))
    array = runner.dryrun_array(infos, max_parallel)  # a backend without arrays says ''
    return SweepPlan(
        sid,
        infos[0].scheduler if infos else scheduler,
        component,
        tuple(args),
        max_parallel,
        tuple(points),
        tuple(infos),
        None if isinstance(array, str) else array,
        array if isinstance(array, str) else "",
    )


def launch(
    runner: Runner, plan: SweepPlan, on_recorded: Callable[[str], None] | None = None
) -> str:
    """Record the sweep, submit every point, record each handle; return the sweep handle.

    ``on_recorded(handle)`` runs once the record exists, before the first submission, so a
    submission that fails half-way still leaves the user a handle to inspect or stop.
    """
    path = sweep_dir(plan.sweep_id)
    path.mkdir(mode=0o700, exist_ok=True)
    record: dict[str, Any] = {
        "version": store.RECORD_VERSION,
        "id": plan.sweep_id,
        "scheduler": plan.scheduler,
        "session": runner.name(),
        "component": plan.component,
        "args": list(plan.args),
        "max_parallel": plan.max_parallel,
        "created": time.time(),
        "points": [{**p.to_dict(), "handle": None} for p in plan.points],
    }
    store.write_json(path / RECORD, record)
    handle = sweep_handle(plan.scheduler, runner.name(), plan.sweep_id)
    if on_recorded is not None:
        on_recorded(handle)
    if plan.array is not None:  # one submission: every element's handle at once
        for row, h in zip(record["points"], runner.schedule_array(plan.array), strict=True):
            row["handle"] = h
        store.write_json(path / RECORD, record)
        return handle
    for row, info in zip(record["points"], plan.infos, strict=True):
        row["handle"] = runner.schedule(info)
        store.write_json(path / RECORD, record)  # a crash mid-way still names what was submitted
    return handle


def sweep_id_of(text: str) -> str | None:
    """The sweep id if text is a sweep handle (``[sched://session/]sweep:ID``), else None."""
    try:
        h: AppHandle = parse_app_handle(text)
    except UsageError:
        return None
    if not h.app_id.startswith(sweeps.SWEEP_PREFIX):
        return None
    sid = h.app_id[len(sweeps.SWEEP_PREFIX) :]
    return sid if sweeps.SWEEP_ID_RE.match(sid) else None


def read_sweep(sweep_id: str) -> dict[str, Any]:
    """The sweep record (AppNotFound if there is none)."""
    path = sweep_dir(sweep_id) / RECORD
    try:
        record = store.read_json(path)
    except FileNotFoundError:
        raise AppNotFound(
            f"no sweep {sweep_id!r} in {path.parent.parent}",
            hint="`trainlaunch list` shows the known apps",
        ) from None
    if not isinstance(record, dict) or not isinstance(record.get("points"), list):
        raise StoreError(f"unreadable sweep record {path}")
    return record


def expand_handle(text: str) -> list[str]:
    """The app handles a handle stands for: a sweep's submitted points, else itself."""
    sid = sweep_id_of(text)
    if sid is None:
        return [str(parse_app_handle(text))]
    return [p["handle"] for p in read_sweep(sid)["points"] if p.get("handle")]


def point_of(app_metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep tag an app carries (``{}`` for an app that is not part of a sweep)."""
    tag = dict(app_metadata.get("trainlaunch") or {})
    return {k: tag[k] for k in ("sweep", "point") if k in tag}


__all__ = [
    "SweepPlan",
    "expand_handle",
    "launch",
    "plan_sweep",
    "point_of",
    "read_sweep",
    "sweep_dir",
    "sweep_handle",
    "sweep_id_of",
]
