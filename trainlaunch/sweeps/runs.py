"""Sweeps, the side with effects: plan every point through a runner, submit, record.

A sweep is recorded in ``$TRAINLAUNCH_HOME/sweeps/<id>/sweep.json`` (record.py) whatever its
scheduler; its handle is ``<scheduler>://<session>/sweep:<id>``. The Runner calls these
(``Runner.dryrun_sweep``/``schedule_sweep``); they take the runner as a :class:`Submitter`,
so this package never imports the runner (which imports it). See docs/sweeps.md.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from trainlaunch import settings, store
from trainlaunch.errors import UsageError
from trainlaunch.specs import AppDef, AppDryRunInfo, CfgVal, SlotGroup
from trainlaunch.sweeps import grammar as sweeps
from trainlaunch.sweeps.record import (
    Journal,
    point_of,
    read_sweep,
    stop_requested,
    sweep_dir,
    sweep_handle,
    write_sweep,
)
from trainlaunch.values import frozen


class Submitter(Protocol):
    """What planning and launching a sweep needs of the Runner."""

    def name(self) -> str:
        """The session name."""
        ...

    def build_component(
        self, component: str, component_args: Sequence[str] | Mapping[str, Any]
    ) -> AppDef:
        """The component's AppDef."""
        ...

    def dryrun(
        self,
        app: AppDef,
        scheduler: str = ...,
        cfg: Mapping[str, CfgVal] | None = None,
        rank_settings: settings.RankSettings | None = None,
    ) -> AppDryRunInfo:
        """One app's exact request."""
        ...

    def dryrun_array(
        self, infos: Sequence[AppDryRunInfo], max_parallel: int | None = None
    ) -> AppDryRunInfo | str:
        """All of them as one job array, or why not."""
        ...

    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        """Submit one; its handle."""
        ...

    def schedule_array(self, dryrun_info: AppDryRunInfo) -> list[str]:
        """Submit an array; its apps' handles."""
        ...

    def cancel(self, app_handle: str) -> None:
        """Stop one app."""
        ...


@frozen
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


def limit_keepers() -> dict[str, str]:
    """The backends that keep a sweep's --max-parallel, and how (their capabilities)."""
    from trainlaunch import schedulers  # the registry: only to say who can

    ways: dict[str, str] = {}
    for capability, how in (("slot_groups", "queued on this machine"), ("arrays", "a job array")):
        for name in schedulers.with_capability(capability):
            ways.setdefault(name, how)
    return ways


def slot_group(sweep_id: str, max_parallel: int) -> SlotGroup:
    """The group a sweep's points share: at most max_parallel of them run at once."""
    return SlotGroup(f"sweep-{sweep_id}", max_parallel)


def plan_sweep(
    runner: Submitter,
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
        app = app.replace(metadata=meta)
        if max_parallel is not None:  # a backend with slot groups queues the rest itself
            app = slot_group(sid, max_parallel).tag(app)
        rs = rank_settings
        if point.seed is not None:
            rs = settings.RankSettings(**{**rank_settings.to_dict(), "seed": point.seed})
        infos.append(runner.dryrun(app, scheduler, cfg, rs))
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


Hold = Callable[[], AbstractContextManager[None]]


def launch(
    runner: Submitter,
    plan: SweepPlan,
    on_recorded: Callable[[str], None] | None = None,
    hold: Hold = contextlib.nullcontext,
) -> str:
    """Record the sweep, submit every point, record each handle; return the sweep handle.

    ``on_recorded(handle)`` runs once the record exists, before the first submission, so a
    submission that fails half-way still leaves the user a handle to inspect or stop.
    ``hold()`` is the context one point's submission and its record run in, so that an
    interrupt never falls between them (the CLI's holds SIGINT/SIGTERM until its end): every
    submitted point is in the record. A `stop` of the sweep ends the submission: no point is
    submitted after it, and one submitted while it ran is stopped here.
    """
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
    write_sweep(record)
    handle = sweep_handle(plan.scheduler, runner.name(), plan.sweep_id)
    if on_recorded is not None:
        on_recorded(handle)
    if plan.array is not None:  # one submission: every element's handle at once
        for row, h in zip(record["points"], runner.schedule_array(plan.array), strict=True):
            row["handle"] = h
        write_sweep(record)
        return handle
    journal = Journal(plan.sweep_id)
    try:
        for i, (row, info) in enumerate(zip(record["points"], plan.infos, strict=True)):
            if stop_requested(plan.sweep_id):
                break  # the rest stay unsubmitted
            with hold():
                row["handle"] = runner.schedule(info)
                journal.add(i, row["handle"])  # a crash mid-way still names what was submitted
            if stop_requested(plan.sweep_id):  # the stop may have read the points before this one
                runner.cancel(row["handle"])
    finally:
        with hold():
            write_sweep(record)
            journal.remove()
    return handle


__all__ = [
    "SweepPlan",
    "Submitter",
    "launch",
    "limit_keepers",
    "plan_sweep",
    "point_of",
    "read_sweep",
    "slot_group",
    "sweep_dir",
    "sweep_handle",
]
