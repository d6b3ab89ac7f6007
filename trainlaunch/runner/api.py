"""The Runner: submits apps to scheduler backends and queries them by handle (see __init__)."""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trainlaunch import schedulers, settings
from trainlaunch.errors import SchedulerUnavailable, TrainlaunchError, UsageError
from trainlaunch.handles import DEFAULT_SESSION, Handle, make_app_handle
from trainlaunch.runner.cfg import CfgRequest, build_cfg
from trainlaunch.runner.plans import with_rank_plans
from trainlaunch.runner.queries import HandleQueries
from trainlaunch.schedulers.api import Capabilities, Scheduler
from trainlaunch.specs import AppDef, AppDryRunInfo, CfgVal, macros, runopts

if TYPE_CHECKING:  # annotations only: sweeps/ is imported where a sweep is planned
    from trainlaunch.sweeps.grammar import SweepPoint
    from trainlaunch.sweeps.runs import SweepPlan


class Runner(HandleQueries):
    """Submits apps to scheduler backends and queries them by handle (queries.py).

    Every method taking a handle takes a parsed one (``AppHandle``, ``SweepHandle``) or its
    text, parsed once here. A sweep's handle stands for every point of it.
    """

    def __init__(
        self,
        name: str = DEFAULT_SESSION,
        schedulers: Mapping[str, Scheduler] | None = None,
        component_defaults: Mapping[str, Mapping[str, Any]] | None = None,
        scheduler_params: Mapping[str, Any] | None = None,
    ) -> None:
        self._name = name
        self._component_defaults = dict(component_defaults or {})
        self._scheduler_params = dict(scheduler_params or {})
        if self._scheduler_params:
            _check_scheduler_params(self._scheduler_params)
        self._given = dict(schedulers or {})  # the caller's instances, by name: used as given
        self._schedulers: dict[str, Scheduler] = dict(self._given)
        self._checked: set[str] = set()  # handles whose session matched their app's

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def name(self) -> str:
        """The session name used in handles."""
        return self._name

    def close(self) -> None:
        """Close every scheduler this runner opened or was given (calling it again is fine)."""
        for s in self._schedulers.values():
            s.close()
        self._schedulers.clear()

    def warm_up(self, scheduler: str) -> None:
        """An app is about to be submitted to scheduler: let it start what the submission will
        need while the caller still builds the app (Scheduler.warm_up). Never raises: a
        scheduler that cannot be had is reported by the submission itself."""
        with contextlib.suppress(TrainlaunchError):
            self._scheduler(scheduler).warm_up()

    def _scheduler(self, name: str) -> Scheduler:
        if name in self._schedulers:
            return self._schedulers[name]
        name = schedulers.canonical_name(name)
        if name not in self._schedulers:
            params = self._scheduler_params
            accepted = schedulers.accepted_params(name) if params else None
            if accepted is not None:  # each backend gets its own params only
                params = {k: v for k, v in params.items() if k in accepted}
            self._schedulers[name] = schedulers.get_scheduler(name, self._name, **params)
        return self._schedulers[name]

    def capabilities(self, scheduler: str) -> Capabilities:
        """What a backend offers beyond the required members (logs, stacks, arrays, ...)."""
        if scheduler in self._given:
            return self._given[scheduler].capabilities
        return schedulers.capabilities_of(schedulers.canonical_name(scheduler))

    # -- submission --------------------------------------------------------------------------

    def dryrun_component(
        self,
        component: str,
        component_args: Sequence[str] | Mapping[str, Any],
        scheduler: str = schedulers.DEFAULT_SCHEDULER,
        cfg: Mapping[str, CfgVal] | None = None,
        rank_settings: settings.RankSettings | None = None,
    ) -> AppDryRunInfo:
        """Resolve the component, build its AppDef and dry-run it."""
        from trainlaunch import rerun

        app = self.build_component(component, component_args)
        record = rerun.run_record(component, component_args)
        app = app.replace(metadata={**app.metadata, rerun.META_KEY: record})
        return self.dryrun(app, scheduler, cfg, rank_settings)

    def dryrun_rerun(
        self,
        app_handle: Handle | str,
        component_args: Sequence[str] | None = None,
        cfg: Mapping[str, CfgVal] | CfgRequest | None = None,
        seed: int | None = None,
    ) -> AppDryRunInfo:
        """Dry-run an app again from its record: same component, args, scheduler, cfg, seed
        and code snapshot; component_args (replacing the original's), cfg and seed override.
        """
        from trainlaunch import rerun

        h = self._app_handle(app_handle)
        takes_cwd = "cwd" in self.scheduler_run_opts(h.scheduler)
        plan = rerun.plan(h, self.describe_app(h), component_args, seed, takes_cwd)
        request = cfg if isinstance(cfg, CfgRequest) else CfgRequest(values=dict(cfg or {}))
        new_cfg = self.scheduler_cfg(plan.scheduler, request, base=plan.cfg)
        app = self.build_component(plan.component, plan.args)
        app = app.replace(metadata={**app.metadata, rerun.META_KEY: plan.record})
        return self.dryrun(app, plan.scheduler, new_cfg, plan.rank_settings)

    def scheduler_cfg(
        self,
        scheduler: str,
        request: CfgRequest,
        base: Mapping[str, CfgVal] | None = None,
    ) -> dict[str, CfgVal]:
        """A backend's options from their layers (runner/cfg.py: base < values < --cfg < flags);
        the one assembly behind `run`, `sweep` and `rerun`."""
        opts = self.scheduler_run_opts(scheduler)
        return build_cfg(scheduler, opts, self.capabilities(scheduler), base, request)

    def cfg_from_str(self, scheduler: str, *literals: str) -> dict[str, CfgVal]:
        """``"k=v,k2=a;b"`` literals typed and checked against a backend's options."""
        return self.scheduler_cfg(scheduler, CfgRequest(texts=literals))

    def build_component(
        self, component: str, component_args: Sequence[str] | Mapping[str, Any]
    ) -> AppDef:
        """Resolve a component and call it with args (argv list or keyword mapping)."""
        from trainlaunch.resolver import find_component

        comp = find_component(component)
        defaults = self._component_defaults.get(component, {})
        if isinstance(component_args, Mapping):
            return comp.call(dict(component_args), defaults)
        return comp.materialize(list(component_args), defaults)

    def run_component(
        self,
        component: str,
        component_args: Sequence[str] | Mapping[str, Any],
        scheduler: str = schedulers.DEFAULT_SCHEDULER,
        cfg: Mapping[str, CfgVal] | None = None,
        rank_settings: settings.RankSettings | None = None,
    ) -> str:
        """Resolve, dry-run and schedule a component; return its handle."""
        return self.schedule(
            self.dryrun_component(component, component_args, scheduler, cfg, rank_settings)
        )

    def run(
        self,
        app: AppDef,
        scheduler: str = schedulers.DEFAULT_SCHEDULER,
        cfg: Mapping[str, CfgVal] | None = None,
        rank_settings: settings.RankSettings | None = None,
    ) -> str:
        """Dry-run and schedule an AppDef; return its handle."""
        return self.schedule(self.dryrun(app, scheduler, cfg, rank_settings))

    def dryrun(
        self,
        app: AppDef,
        scheduler: str = schedulers.DEFAULT_SCHEDULER,
        cfg: Mapping[str, CfgVal] | None = None,
        rank_settings: settings.RankSettings | None = None,
    ) -> AppDryRunInfo:
        """Inject the rank settings, resolve options and render the exact request (pure)."""
        if not isinstance(app, AppDef):
            raise UsageError(f"expected an AppDef, got {type(app).__name__}")
        name = schedulers.canonical_name(scheduler)
        sched = self._scheduler(name)
        app.check_size(sched.max_replicas, name)  # before anything is planned per replica
        resolved = sched.run_opts().resolve(cfg or {}, name)
        rs = rank_settings or settings.RankSettings()
        drawn = {}
        if rs.seed is None:  # a fresh seed per app, recorded so that every run can be reproduced
            # uniform in [0, 2**31) from os.urandom: `secrets` would cost ~5 ms of every `run`
            seed = int.from_bytes(os.urandom(4), "big") >> 1
            rs = settings.RankSettings(**{**rs.to_dict(), "seed": seed})
            drawn["seed"] = str(rs.seed)
        if rs.metrics_path is None:
            default = sched.default_metrics_path(resolved)
            if default:
                rs = settings.RankSettings(**{**rs.to_dict(), "metrics_path": default})
        injected = settings.inject(app, rs, f"{name}://{self._name}/")
        if resolved.get("preflight"):  # the node agents' --preflight* flags (docs/preflight.md)
            from trainlaunch.agent.request import with_preflight

            injected = with_preflight(injected, resolved)
        info = with_rank_plans(sched.submit_dryrun(injected, resolved))
        return dataclasses.replace(info, drawn={**info.drawn, **drawn}) if drawn else info

    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        """Submit a dry-run result; return the app handle."""
        sched = self._scheduler(dryrun_info.scheduler)
        app_id = sched.schedule(dryrun_info)
        return make_app_handle(dryrun_info.scheduler, self._name, app_id)

    def dryrun_array(
        self, infos: Sequence[AppDryRunInfo], max_parallel: int | None = None
    ) -> AppDryRunInfo | str:
        """One request for these dry-runs (one backend) as a job array, or why not ('': the
        backend has no arrays). See Scheduler.submit_array_dryrun."""
        if not infos:
            return ""
        return self._scheduler(infos[0].scheduler).submit_array_dryrun(infos, max_parallel)

    def schedule_array(self, dryrun_info: AppDryRunInfo) -> builtins.list[str]:
        """Submit a dryrun_array request; the handles of its apps, in order."""
        ids = self._scheduler(dryrun_info.scheduler).schedule_array(dryrun_info)
        return [make_app_handle(dryrun_info.scheduler, self._name, i) for i in ids]

    def dryrun_sweep(
        self,
        component: str,
        component_args: Sequence[str],
        points: Sequence[SweepPoint],
        scheduler: str = schedulers.DEFAULT_SCHEDULER,
        cfg: Mapping[str, CfgVal] | None = None,
        rank_settings: settings.RankSettings | None = None,
        max_parallel: int | None = None,
    ) -> SweepPlan:
        """Dry-run every point of a sweep (sweeps/runs.py), as one job array where the backend
        has arrays; UsageError if the backend cannot keep max_parallel (docs/sweeps.md)."""
        from trainlaunch.sweeps import runs

        rs = rank_settings or settings.RankSettings()
        plan = runs.plan_sweep(
            self, component, component_args, points, scheduler, cfg or {}, rs, max_parallel
        )
        kept = plan.array is not None or self.capabilities(plan.scheduler).slot_groups
        if max_parallel is not None and not kept:
            raise UsageError(
                f"--max-parallel on {plan.scheduler}: "
                + (
                    f"the sweep cannot be one job array: {plan.array_note}"
                    if plan.array_note
                    else "enforced on "
                    + ", ".join(f"{k} ({how})" for k, how in runs.limit_keepers().items())
                    + " only"
                ),
                hint="drop --max-parallel (one job per point) or sweep what keeps the "
                "resources equal; docs/sweeps.md",
            )
        return plan

    def schedule_sweep(self, plan: SweepPlan, on_recorded: Any = None, hold: Any = None) -> str:
        """Record and submit a dry-run sweep; its handle. on_recorded(handle) runs before the
        first submission (a failure half-way still leaves a handle to inspect or stop); each
        point is submitted and recorded inside hold() (the CLI holds interrupts there)."""
        from trainlaunch.sweeps import runs

        if hold is None:
            return runs.launch(self, plan, on_recorded)
        return runs.launch(self, plan, on_recorded, hold)

    def scheduler_run_opts(self, scheduler: str) -> runopts:
        """The typed options of one backend."""
        return self._scheduler(scheduler).run_opts()

    def run_opts(self) -> dict[str, runopts]:
        """The typed options of every backend that can be loaded here (see backend_run_opts)."""
        return {k: v for k, v in self.backend_run_opts().items() if isinstance(v, runopts)}

    def backend_run_opts(self) -> dict[str, runopts | SchedulerUnavailable]:
        """Per backend, its typed options or why it cannot be loaded (never silently absent)."""
        out: dict[str, runopts | SchedulerUnavailable] = {}
        for name in schedulers.scheduler_names():
            try:
                out[name] = self.scheduler_run_opts(name)
            except SchedulerUnavailable as e:  # a broken plugin must not hide the others
                out[name] = e
        return out

    def scheduler_backends(self) -> builtins.list[str]:
        """Names of every backend (the registry's, then any given to the constructor)."""
        names = schedulers.scheduler_names()
        return names + [n for n in self._given if n not in names]


def _check_scheduler_params(params: Mapping[str, Any]) -> None:
    """A scheduler param no backend declares is a UsageError (never silently dropped)."""
    known: set[str] = set()
    for name in schedulers.scheduler_names():
        try:
            accepted = schedulers.accepted_params(name)
        except SchedulerUnavailable:
            continue
        if accepted is None:  # a plugin that declares nothing takes whatever it is given
            return
        known |= accepted
    unknown = sorted(set(params) - known)
    if unknown:
        raise UsageError(
            f"unknown scheduler parameter(s): {', '.join(unknown)}; "
            f"valid: {', '.join(sorted(known))}"
        )


def get_runner(
    name: str | None = None,
    component_defaults: Mapping[str, Mapping[str, Any]] | None = None,
    **scheduler_params: Any,
) -> Runner:
    """Create a Runner (use it as a context manager); scheduler_params go to every backend
    that declares them (an unknown one is a UsageError)."""
    return Runner(name or DEFAULT_SESSION, None, component_defaults, scheduler_params)


__all__ = ["Runner", "get_runner", "macros"]
