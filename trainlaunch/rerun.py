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
from trainlaunch.handles import AppHandle
from trainlaunch.schedulers.api import DescribeAppResponse
from trainlaunch.specs import RUN_RECORD_KEY, CfgVal
from trainlaunch.values import frozen

META_KEY = RUN_RECORD_KEY  # AppDef.metadata key: {component, args, cwd, code[, rerun_of]}


def run_record(
    component: str,
    component_args: Sequence[str] | Mapping[str, Any],
    cwd: str | None = None,
    code: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What an app records about how it was made (JSON-able); code: the code of record when
    it is known (a rerun of a snapshot runs the original's), else looked up in cwd's git."""
    from trainlaunch.schedulers.coderecord import code_record

    where = cwd or os.getcwd()
    rec: dict[str, Any] = {"component": component, "cwd": where}
    if isinstance(component_args, Mapping):
        rec["kwargs"] = dict(component_args)
    else:
        rec["args"] = list(component_args)
    rec["code"] = code if code is not None else code_record(where)  # schedulers/coderecord.py
    return rec


@frozen
class RerunPlan:
    """Everything needed to dry-run the app again."""

    component: str
    args: list[str] | dict[str, Any]
    scheduler: str
    cfg: dict[str, CfgVal]
    rank_settings: settings.RankSettings
    record: dict[str, Any]  # the new app's META_KEY record (names the original)


def plan(
    handle: AppHandle,
    resp: DescribeAppResponse,
    component_args: Sequence[str] | None = None,
    seed: int | None = None,
    takes_cwd: bool = False,
) -> RerunPlan:
    """The rerun of the app resp describes; component_args replace the original's. Its cfg
    is the original's (the base that --cfg overrides: runner/cfg.py); on a backend with a
    ``cwd`` option (takes_cwd) it runs where the original was started."""
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
    scheduler = handle.scheduler
    new_cfg: dict[str, CfgVal] = {k: v for k, v in resp.cfg.items() if v is not None}
    snap = resp.snapshot
    cwd = str(rec.get("cwd") or "")
    if snap is not None and not (isinstance(snap, Mapping) and snap.get("path")):
        raise UsageError(
            f"{handle} ran from a code snapshot, but its record of it is damaged ({snap!r})",
            hint=f"`trainlaunch run {rec['component']} ...` runs today's code",
        )
    if isinstance(snap, Mapping):  # the original's code, checked whole by the backend (a
        new_cfg["snapshot"] = str(snap["path"])  # deleted copy is refused, not replaced)
    elif takes_cwd and cwd and "cwd" not in new_cfg:
        new_cfg["cwd"] = cwd
    # a rerun of a snapshot runs the original's code: its code of record is the original's
    same = (
        rec.get("code")
        if isinstance(snap, Mapping) and isinstance(rec.get("code"), Mapping)
        else None
    )
    record = {**run_record(rec["component"], args, cwd or None, same), "rerun_of": str(handle)}
    return RerunPlan(
        component=rec["component"],
        args=args,
        scheduler=scheduler,
        cfg=new_cfg,
        rank_settings=settings.RankSettings(**rank),
        record=record,
    )


__all__ = ["META_KEY", "RerunPlan", "plan", "run_record"]
