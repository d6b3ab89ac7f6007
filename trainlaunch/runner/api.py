"""The Runner (TorchX's API): component -> AppDef -> dryrun -> schedule, and queries by handle.

Usage::

    with get_runner() as runner:
        handle = runner.run_component("utils.echo", ["--msg", "hi"], scheduler="local")
        print(runner.wait(handle).state)
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainlaunch import schedulers, settings
from trainlaunch.errors import AppNotFound, SchedulerUnavailable, UsageError, WaitTimeout
from trainlaunch.handles import DEFAULT_SESSION, AppHandle, make_app_handle, parse_app_handle
from trainlaunch.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream
from trainlaunch.specs import (
    NODE_AGENT_ARGS,
    AppDef,
    AppDryRunInfo,
    AppStatus,
    CfgVal,
    macros,
    runopts,
)

if TYPE_CHECKING:  # annotations only: stacks is imported where stacks are read
    from trainlaunch.stacks import RankStack

DRYRUN_RANKS_SHOWN = 4  # a node's rank plan in --dryrun: the first ranks and the last one
DRYRUN_PLANS_SHOWN = 3  # rank plans in --dryrun: of the first nodes and the last one
POLL_FIRST_INTERVAL = 0.02  # seconds
POLL_MAX_INTERVAL = 0.1  # seconds; Runner.poll's default cap


def last_of(polls: Iterator[DescribeAppResponse]) -> DescribeAppResponse:
    """Run a poller to its end; its last (terminal) description."""
    return collections.deque(polls, maxlen=1)[0]


class Runner:
    """Submits apps to scheduler backends and queries them by handle."""

    def __init__(
        self,
        name: str = DEFAULT_SESSION,
        component_defaults: Mapping[str, Mapping[str, Any]] | None = None,
        scheduler_params: Mapping[str, Any] | None = None,
    ) -> None:
        self._name = name
        self._component_defaults = dict(component_defaults or {})
        self._scheduler_params = dict(scheduler_params or {})
        if self._scheduler_params:
            _check_scheduler_params(self._scheduler_params)
        self._schedulers: dict[str, Scheduler] = {}
        self._checked: set[str] = set()  # handles whose session matched their app's

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def name(self) -> str:
        """The session name used in handles."""
        return self._name

    def close(self) -> None:
        """Close every scheduler this runner opened."""
        for s in self._schedulers.values():
            s.close()
        self._schedulers.clear()

    def _scheduler(self, name: str) -> Scheduler:
        name = schedulers.canonical_name(name)
        if name not in self._schedulers:
            params = self._scheduler_params
            accepted = schedulers.accepted_params(name) if params else None
            if accepted is not None:  # each backend gets its own params only
                params = {k: v for k, v in params.items() if k in accepted}
            self._schedulers[name] = schedulers.get_scheduler(name, self._name, **params)
        return self._schedulers[name]

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
        app_handle: str,
        component_args: Sequence[str] | None = None,
        cfg: Mapping[str, CfgVal] | None = None,
        seed: int | None = None,
    ) -> AppDryRunInfo:
        """Dry-run an app again from its record: same component, args, scheduler, cfg, seed
        and code snapshot; component_args (replacing the original's), cfg and seed override.
        """
        from trainlaunch import rerun

        resp = self.describe_app(app_handle)
        plan = rerun.plan(str(parse_app_handle(app_handle)), resp, component_args, cfg, seed)
        app = self.build_component(plan.component, plan.args)
        app = app.replace(metadata={**app.metadata, rerun.META_KEY: plan.record})
        return self.dryrun(app, plan.scheduler, plan.cfg, plan.rank_settings)

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
            import secrets  # only submissions draw one: status/list/logs skip the import

            rs = settings.RankSettings(**{**rs.to_dict(), "seed": secrets.randbelow(2**31)})
            drawn["seed"] = str(rs.seed)
        if rs.metrics_path is None:
            default = sched.default_metrics_path(resolved)
            if default:
                rs = settings.RankSettings(**{**rs.to_dict(), "metrics_path": default})
        injected = settings.inject(app, rs, f"{name}://{self._name}/")
        info = _with_rank_plans(sched.submit_dryrun(injected, resolved))
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

    # -- queries -----------------------------------------------------------------------------

    def _parse(self, app_handle: str) -> tuple[Scheduler, AppHandle]:
        """The backend and parsed handle; AppNotFound if the app lives in another session.

        The session is part of an app's identity: ``local://other/ID`` does not name the app
        started as ``local://trainlaunch/ID`` (a bare id means the CLI's session,
        ``trainlaunch``). Backends that recorded no session (jobs trainlaunch did not start,
        stopped Kubernetes apps) are not checked.
        """
        h = parse_app_handle(app_handle)
        sched = self._scheduler(h.scheduler)
        key = str(h)
        if key not in self._checked:  # an app's session never changes: check it once
            session = sched.session_of(h.app_id)
            if session is not None and session != h.session:
                real = make_app_handle(h.scheduler, session, h.app_id)
                raise AppNotFound(
                    f"no app {h.app_id} in session {h.session!r} (it belongs to session "
                    f"{session!r})",
                    hint=f"its handle is {real}",
                )
            self._checked.add(key)
        return sched, h

    def describe_app(self, app_handle: str) -> DescribeAppResponse:
        """Everything the backend knows about the app (AppNotFound if unknown)."""
        sched, h = self._parse(app_handle)
        return sched.describe(h.app_id)

    def metrics_location(self, app_handle: str, resp: DescribeAppResponse) -> str | None:
        """Where on this machine the app's metrics files are, if its backend knows better
        than the rank settings it recorded (None); UsageError if they are out of reach."""
        sched, _ = self._parse(app_handle)
        return sched.metrics_location(resp)

    def status(self, app_handle: str) -> AppStatus:
        """The app's status (AppNotFound if unknown; never None)."""
        return self.describe_app(app_handle).status

    def describe(self, app_handle: str) -> AppDef | None:
        """The AppDef as submitted (AppNotFound if the app is unknown)."""
        return self.describe_app(app_handle).app

    def poll(
        self,
        app_handle: str,
        timeout: float | None = None,
        max_interval: float = POLL_MAX_INTERVAL,
    ) -> Iterator[DescribeAppResponse]:
        """Yield the app's description at each poll until (and including) the terminal one.

        The one polling policy of trainlaunch: the first poll is immediate, then the interval
        grows from POLL_FIRST_INTERVAL by half each time up to max_interval (a local status
        read costs ~1 ms, so short jobs end fast without busy-looping on long ones). After
        timeout seconds WaitTimeout is raised instead of the next non-terminal description.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = min(POLL_FIRST_INTERVAL, max_interval)
        while True:
            resp = self.describe_app(app_handle)
            if resp.status.is_terminal:
                yield resp
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"{app_handle} is still {resp.status.state.name} after {timeout:g}s",
                    hint="`trainlaunch wait` again, or `trainlaunch stop` it",
                )
            yield resp
            pause = interval if deadline is None else min(interval, deadline - time.monotonic())
            time.sleep(max(pause, 0.0))
            interval = min(interval * 1.5, max_interval)

    def wait(
        self,
        app_handle: str,
        wait_interval: float = POLL_MAX_INTERVAL,
        timeout: float | None = None,
    ) -> AppStatus:
        """Block until the app is terminal; WaitTimeout after timeout seconds."""
        return last_of(self.poll(app_handle, timeout, wait_interval)).status

    def cancel(self, app_handle: str) -> None:
        """Stop the app and every process of it."""
        sched, h = self._parse(app_handle)
        sched.cancel(h.app_id)

    stop = cancel

    def cancel_many(self, app_handles: Sequence[str]) -> None:
        """Stop several apps; each backend stops its own together where it can (one scancel
        for a whole Slurm job array), else one by one in the order given."""
        by_backend: dict[Scheduler, builtins.list[str]] = {}
        for handle in app_handles:
            sched, h = self._parse(handle)
            by_backend.setdefault(sched, []).append(h.app_id)
        for sched, ids in by_backend.items():
            sched.cancel_many(ids)

    def requeue(self, app_handle: str) -> None:
        """Preempt the app: its ranks get the warning, then it runs again (max_requeues)."""
        sched, h = self._parse(app_handle)
        sched.requeue(h.app_id)

    def list(self, scheduler: str = schedulers.DEFAULT_SCHEDULER) -> list[ListAppResponse]:
        """The apps a backend knows that trainlaunch started."""
        return self._scheduler(scheduler).list()

    def log_lines(
        self,
        app_handle: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: float | None = None,
        until: float | None = None,
        should_tail: bool = False,
        streams: Stream | str | None = None,
    ) -> Iterator[str]:
        """Lines of replica k of role_name; with should_tail, follow until the app ends."""
        sched, h = self._parse(app_handle)
        stream = Stream(streams) if streams else None
        return sched.log_iter(h.app_id, role_name, k, regex, since, until, should_tail, stream)

    def log_files(
        self, app_handle: str, role_name: str, k: int = 0, streams: Stream | str | None = None
    ) -> builtins.list[Path] | None:
        """Local files with replica k's whole log, if the backend keeps them (else None)."""
        sched, h = self._parse(app_handle)
        return sched.log_files(h.app_id, role_name, k, Stream(streams) if streams else None)

    def log_replicas(self, app_handle: str, role_name: str) -> builtins.list[int]:
        """Replica ids of a role."""
        sched, h = self._parse(app_handle)
        return sched.log_replicas(h.app_id, role_name)

    def stacks(self, app_handle: str, native: bool = False) -> builtins.list[RankStack]:
        """Where every rank of a running app is now; UsageError once the app has ended."""
        sched, h = self._parse(app_handle)
        status = sched.describe(h.app_id).status
        if status.is_terminal:
            raise UsageError(
                f"{app_handle} has ended ({status.state.name}): no rank left to dump",
                hint="`trainlaunch status` says how it ended, `trainlaunch logs` what it printed",
            )
        return sched.stacks(h.app_id, native)

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
        """Names of every backend."""
        return schedulers.scheduler_names()


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


def _with_rank_plans(info: AppDryRunInfo) -> AppDryRunInfo:
    """Add what each rank of a planned node agent will receive (the agent's own plan)."""
    agents = [r for r in info.replicas if r.node_agent]
    if not agents:
        return info
    from trainlaunch.agent.dryrun import rank_envs  # the agent plans; no backend imports it
    from trainlaunch.agent.plan import describe_nodes

    planned = {*range(DRYRUN_PLANS_SHOWN - 1), len(agents) - 1}  # a big app stays cheap
    notes = []
    for n, replica in enumerate(agents):
        if n not in planned:
            if n == DRYRUN_PLANS_SHOWN - 1:
                notes.append(
                    f"\n(rank plans of replicas {n}-{len(agents) - 2} left out: the same pattern)"
                )
            continue
        notes.append(f"\n[{replica.role}/{replica.replica_id} ranks]")
        agent_args = list(replica.cmd[1 + len(NODE_AGENT_ARGS) :])
        notes.append(f"  # {describe_nodes(agent_args, replica.env)}")
        ranks = rank_envs(agent_args, replica.env, max_ranks=DRYRUN_RANKS_SHOWN)
        for i, rank in enumerate(ranks):
            lr = rank.get("local_rank")
            if i and isinstance(lr, int) and lr - ranks[i - 1]["local_rank"] > 1:
                skipped = lr - ranks[i - 1]["local_rank"] - 1
                notes.append(
                    f"  ... {skipped} more ranks like these (local {lr - skipped}-{lr - 1})"
                )
            env = rank.get("env", {})
            notes.append(
                f"  rank {rank.get('rank')} (local {rank.get('local_rank')}): "
                + " ".join(f"{k}={v}" for k, v in sorted(env.items()))
            )
            if "argv" in rank:
                notes.append(f"    argv: {rank['argv']}")
    return dataclasses.replace(info, notes=(*info.notes, *notes))


def get_runner(
    name: str | None = None,
    component_defaults: Mapping[str, Mapping[str, Any]] | None = None,
    **scheduler_params: Any,
) -> Runner:
    """Create a Runner (use it as a context manager)."""
    return Runner(name or DEFAULT_SESSION, component_defaults, scheduler_params)


__all__ = ["Runner", "get_runner", "macros"]
