"""`rerun`: submit an app again from its record (pure: the Runner does the submitting).

Every app started from a component records, in its AppDef's metadata under ``META_KEY``, the
component, its arguments and the directory it was started from; the rank settings (seed
included) are recorded under ``trainlaunch`` and the scheduler options and code snapshot by
the backend. :func:`plan` turns that record and the user's overrides into what the Runner
needs to dry-run the same app again.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from trainlaunch import settings
from trainlaunch.errors import UsageError
from trainlaunch.handles import parse_app_handle
from trainlaunch.schedulers.api import DescribeAppResponse
from trainlaunch.specs import CfgVal

META_KEY = "trainlaunch_run"  # AppDef.metadata key: {component, args, cwd[, rerun_of]}


def run_record(
    component: str, component_args: Sequence[str] | Mapping[str, Any], cwd: str | None = None
) -> dict[str, Any]:
    """What an app records about how it was made (JSON-able)."""
    rec: dict[str, Any] = {"component": component, "cwd": cwd or os.getcwd()}
    if isinstance(component_args, Mapping):
        rec["kwargs"] = dict(component_args)
    else:
        rec["args"] = list(component_args)
    return rec


@dataclasses.dataclass(frozen=True)
class RerunPlan:
    """Everything needed to dry-run the app again."""

    component: str
    args: list[str] | dict[str, Any]
    scheduler: str
    cfg: dict[str, CfgVal]
    rank_settings: settings.RankSettings
    record: dict[str, Any]  # the new app's META_KEY record (names the original)


def plan(
    handle: str,
    resp: DescribeAppResponse,
    component_args: Sequence[str] | None = None,
    cfg: Mapping[str, CfgVal] | None = None,
    seed: int | None = None,
) -> RerunPlan:
    """The rerun of the app resp describes; component_args replace the original's."""
    app = resp.app
    rec = app.metadata.get(META_KEY) if app is not None else None
    if not isinstance(rec, Mapping) or not isinstance(rec.get("component"), str):
        raise UsageError(
            f"{handle} has no record of the component it was started from: cannot rerun it",
            hint="rerun works for apps started with `trainlaunch run COMPONENT ...`",
        )
    args: list[str] | dict[str, Any]
    if component_args:
        args = list(component_args)
    elif isinstance(rec.get("kwargs"), Mapping):
        args = dict(rec["kwargs"])
    else:
        args = [str(a) for a in rec.get("args") or []]
    recorded = dict(app.metadata.get("trainlaunch") or {}) if app is not None else {}
    fields = {f.name for f in dataclasses.fields(settings.RankSettings)}
    rank = {k: v for k, v in recorded.items() if k in fields}
    if seed is not None:
        rank["seed"] = seed
    scheduler = parse_app_handle(handle).scheduler
    new_cfg: dict[str, CfgVal] = {k: v for k, v in resp.cfg.items() if v is not None}
    snap = resp.metadata.get("snapshot")
    cwd = str(rec.get("cwd") or "")
    if isinstance(snap, Mapping) and snap.get("path") and os.path.isdir(str(snap["path"])):
        new_cfg["snapshot"] = str(snap["path"])  # the original's code, not today's tree
    elif scheduler == "local" and cwd and "cwd" not in new_cfg:
        new_cfg["cwd"] = cwd
    new_cfg.update(cfg or {})
    record = {**run_record(rec["component"], args, cwd or None), "rerun_of": handle}
    return RerunPlan(
        component=rec["component"],
        args=args,
        scheduler=scheduler,
        cfg=new_cfg,
        rank_settings=settings.RankSettings(**rank),
        record=record,
    )


__all__ = ["META_KEY", "RerunPlan", "plan", "run_record"]
