"""The Runner's queries by handle: one app's, or a sweep's every point (the Runner's half
that never submits). A string handle is parsed once, here; a value is used as it is."""

from __future__ import annotations

import abc
import builtins
import contextlib
import datetime
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainlaunch import schedulers
from trainlaunch.errors import AppNotFound, UsageError
from trainlaunch.handles import AppHandle, Handle, SweepHandle, make_app_handle, parse_handle
from trainlaunch.runner import outcome, polling
from trainlaunch.runner.polling import POLL_MAX_INTERVAL, last_of
from trainlaunch.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream
from trainlaunch.specs import AppDef, AppState, AppStatus

if TYPE_CHECKING:  # annotations only: each is imported where it is used
    from trainlaunch.stacks.values import RankStack
    from trainlaunch.sweeps.status import SweepDescription

    Description = DescribeAppResponse | SweepDescription  # one app's, or every point's


class HandleQueries(abc.ABC):
    """Everything the Runner answers about a handle; the Runner provides the backends."""

    _name: str  # the session (set by the Runner)
    _checked: set[str]  # handles whose session matched their app's (set by the Runner)

    @abc.abstractmethod
    def _scheduler(self, name: str) -> Scheduler:
        """The backend called name (the Runner opens each once)."""

    def _handle(self, handle: Handle | str) -> Handle:
        """The handle's value (a string is parsed: once, here)."""
        return parse_handle(handle)

    def _app_handle(self, handle: Handle | str) -> AppHandle:
        """An app's handle; a sweep's is a UsageError (it names many apps)."""
        h = parse_handle(handle)
        if isinstance(h, SweepHandle):
            raise UsageError(
                f"{h} is a sweep: this takes one app's handle",
                hint=f"`trainlaunch status {h}` lists the handles of its points",
            )
        return h

    def _app(self, handle: Handle | str) -> tuple[Scheduler, AppHandle]:
        """The backend and the app's handle; AppNotFound if the app lives in another session.

        The session is part of an app's identity: ``local://other/ID`` does not name the app
        started as ``local://trainlaunch/ID`` (a bare id means the CLI's session,
        ``trainlaunch``). Backends that recorded no session (jobs trainlaunch did not start,
        stopped Kubernetes apps) are not checked.
        """
        h = self._app_handle(handle)
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

    def describe_app(self, app_handle: Handle | str) -> DescribeAppResponse:
        """Everything the backend knows about the app; raises AppNotFound if it is unknown
        (describe() is the seed's variant: None)."""
        sched, h = self._app(app_handle)
        return sched.describe(h.app_id)

    def describe_sweep(
        self,
        sweep_handle: SweepHandle | str,
        known: Mapping[str, DescribeAppResponse] | None = None,
    ) -> SweepDescription:
        """Every point of a sweep with its app's description (AppNotFound: no such sweep).
        Terminal descriptions in known (by point handle) are kept, not asked for again."""
        from trainlaunch.sweeps import record, status

        h = self._handle(sweep_handle)
        if not isinstance(h, SweepHandle):
            raise UsageError(f"{h} is an app, not a sweep")
        rec = record.read_sweep(h.sweep_id)
        known = {**(known or {}), **self._queued_points(rec, known or {})}
        return status.describe(h, rec, self.describe_app, known)

    def _queued_points(
        self, rec: Mapping[str, Any], known: Mapping[str, DescribeAppResponse]
    ) -> dict[str, DescribeAppResponse]:
        """The sweep's points that wait for a slot, each backend asked once for all of them
        (Scheduler.describe_queued): 10,000 queued points are one directory listing."""
        by_backend: dict[str, dict[str, str]] = {}
        for row in rec["points"]:
            h = row.get("handle")
            if isinstance(h, str) and h not in known:
                with contextlib.suppress(UsageError):
                    a = parse_handle(h)
                    if isinstance(a, AppHandle):
                        by_backend.setdefault(a.scheduler, {})[a.app_id] = h
        out: dict[str, DescribeAppResponse] = {}
        for backend, handles in by_backend.items():
            found = self._scheduler(backend).describe_queued(list(handles))
            out.update({handles[app_id]: resp for app_id, resp in found.items()})
        return out

    def describe_handle(self, handle: Handle | str) -> Description:
        """One app's description, or for a sweep's handle every point's (AppNotFound)."""
        h = self._handle(handle)
        return self.describe_sweep(h) if isinstance(h, SweepHandle) else self.describe_app(h)

    def apps(self, handle: Handle | str) -> builtins.list[str]:
        """The handles of the apps a handle stands for: a sweep's submitted points, or one."""
        h = self._handle(handle)
        if isinstance(h, SweepHandle):
            return self.describe_sweep(h).handles()
        return [str(self._app(h)[1])]

    def metrics_location(self, app_handle: Handle | str, resp: DescribeAppResponse) -> str | None:
        """Where on this machine the app's metrics files are, if its backend knows better
        than the rank settings it recorded (None); UsageError if they are out of reach."""
        sched, _ = self._app(app_handle)
        return sched.metrics_location(resp)

    def status(self, app_handle: Handle | str) -> AppStatus | None:
        """The app's status, or None if it no longer exists (the seed's contract); for a
        sweep, one status for all its points (runner/outcome.py)."""
        try:
            return _status_of(self.describe_handle(app_handle))
        except AppNotFound:
            return None

    def describe(self, app_handle: Handle | str) -> AppDef | None:
        """The AppDef as submitted; None if the app no longer exists, its backend did not
        record it, or the handle is a sweep's (many AppDefs: describe_sweep)."""
        h = self._handle(app_handle)
        if isinstance(h, SweepHandle):
            return None
        try:
            return self.describe_app(h).app
        except AppNotFound:
            return None

    def poll(
        self,
        app_handle: Handle | str,
        timeout: float | None = None,
        max_interval: float = POLL_MAX_INTERVAL,
    ) -> Iterator[Description]:
        """Yield the description (one app's, or a sweep's) at each poll until (and including)
        the terminal one; WaitTimeout after timeout seconds; AppNotFound if unknown.

        The one polling rule (runner/polling.py) for one app and for many: a sweep's poll
        asks only for the points that have not ended.
        """
        h = self._handle(app_handle)
        if not isinstance(h, SweepHandle):
            return polling.poll(
                lambda: self.describe_app(h),
                timeout,
                max_interval,
                lambda r: f"{h} is still {r.status.state.name}",
            )
        known: dict[str, DescribeAppResponse] = {}

        def sweep() -> SweepDescription:
            desc = self.describe_sweep(h, known)
            known.update(
                {p.handle: p.resp for p in desc.points if p.handle and p.is_terminal and p.resp}
            )
            return desc

        return polling.poll(
            sweep,
            timeout,
            max_interval,
            lambda d: f"{d.handle}: {sum(not p.is_terminal for p in d.points)} apps still running",
        )

    def wait(
        self,
        app_handle: Handle | str,
        wait_interval: float = POLL_MAX_INTERVAL,
        timeout: float | None = None,
    ) -> AppStatus | None:
        """Block until the app (every point of a sweep) has ended; its final status, or None
        if it no longer exists; WaitTimeout after timeout seconds."""
        try:
            return _status_of(last_of(self.poll(app_handle, timeout, wait_interval)))
        except AppNotFound:
            return None

    def cancel(self, app_handle: Handle | str, *, interrupt: bool = False) -> None:
        """Stop the app and every process of it; nothing if it does not exist (the seed's
        contract). A sweep: its queued points first (none starts), then the running ones.

        interrupt: stop it as Ctrl-C stops torchrun, the ranks' SIGINT first where the
        backend can send it (Scheduler.interrupt; a sweep's points are cancelled)."""
        h = self._handle(app_handle)
        try:
            if isinstance(h, SweepHandle):
                self._close_sweep(h)
                points = self.describe_sweep(h).points
                live = [p for p in points if p.handle and not p.is_terminal]
                live.sort(key=lambda p: p.status.state != AppState.PENDING)  # queued first
                self.cancel_many([p.handle for p in live if p.handle])  # slurm: one scancel
            else:
                sched, a = self._app(h)
                (sched.interrupt if interrupt else sched.cancel)(a.app_id)
        except AppNotFound:
            return

    stop = cancel

    def _close_sweep(self, h: SweepHandle) -> None:
        """A stopped sweep starts nothing more: a submission under way ends, and its queued
        points (its slot group) end CANCELLED at once, none started (docs/sweeps.md)."""
        from trainlaunch.sweeps import record, runs

        rec = record.read_sweep(h.sweep_id)
        record.request_stop(h.sweep_id)  # before the points are read: see runs.launch
        if rec.get("max_parallel"):
            group = runs.slot_group(h.sweep_id, int(rec["max_parallel"]))
            self._scheduler(str(rec["scheduler"])).close_slot_group(group.name)

    def cancel_many(self, app_handles: Sequence[Handle | str]) -> None:
        """Stop several apps; each backend stops its own together where it can (one scancel
        for a whole Slurm job array), else one by one in the order given (AppNotFound)."""
        by_backend: dict[Scheduler, builtins.list[str]] = {}
        for handle in app_handles:
            sched, h = self._app(handle)
            by_backend.setdefault(sched, []).append(h.app_id)
        for sched, ids in by_backend.items():
            sched.cancel_many(ids)

    def requeue(self, app_handle: Handle | str) -> None:
        """Preempt the app: its ranks get the warning, then it runs again (max_requeues);
        AppNotFound if unknown, Unsupported on a backend without requeue."""
        sched, h = self._app(app_handle)
        sched.requeue(h.app_id)

    def list(self, scheduler: str | None = None) -> dict[str, AppDef]:
        """This session's apps on a backend (default: local), by handle (the seed's contract;
        list_apps() lists every session's, with state)."""
        apps: dict[str, AppDef] = {}
        for row in self.list_apps(scheduler):
            h = parse_handle(row.app_handle)
            if not isinstance(h, AppHandle) or h.session != self._name:
                continue
            try:
                app = self.describe_app(h).app
            except AppNotFound:  # it went away while we listed
                continue
            if app is not None:
                apps[row.app_handle] = app
        return apps

    def list_apps(self, scheduler: str | None = None) -> builtins.list[ListAppResponse]:
        """Every app a backend (default: local) knows that trainlaunch started, newest first."""
        return self._scheduler(scheduler or schedulers.DEFAULT_SCHEDULER).list()

    def log_lines(
        self,
        app_handle: Handle | str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: float | datetime.datetime | None = None,
        until: float | datetime.datetime | None = None,
        should_tail: bool = False,
        streams: Stream | str | None = None,
    ) -> Iterator[str]:
        """Lines (no newline) of replica k of role_name, from since to until (unix times or
        datetimes); with should_tail, follow until the app ends. AppNotFound if the app (or
        its role, replica) is unknown; Unsupported on a backend without logs."""
        sched, h = self._app(app_handle)
        stream = Stream(streams) if streams else None
        start, end = _unix(since), _unix(until)
        return sched.log_iter(h.app_id, role_name, k, regex, start, end, should_tail, stream)

    def log_files(
        self,
        app_handle: Handle | str,
        role_name: str,
        k: int = 0,
        streams: Stream | str | None = None,
    ) -> builtins.list[Path] | None:
        """Local files with replica k's whole log, if the backend keeps them (else None)."""
        sched, h = self._app(app_handle)
        return sched.log_files(h.app_id, role_name, k, Stream(streams) if streams else None)

    def log_replicas(self, app_handle: Handle | str, role_name: str) -> builtins.list[int]:
        """Replica ids of a role."""
        sched, h = self._app(app_handle)
        return sched.log_replicas(h.app_id, role_name)

    def stacks(self, app_handle: Handle | str, native: bool = False) -> builtins.list[RankStack]:
        """Where every rank of a running app is now; UsageError once the app has ended."""
        sched, h = self._app(app_handle)
        status = sched.describe(h.app_id).status
        if status.is_terminal:
            raise UsageError(
                f"{h} has ended ({status.state.name}): no rank left to dump",
                hint="`trainlaunch status` says how it ended, `trainlaunch logs` what it printed",
            )
        return sched.stacks(h.app_id, native)


def _unix(when: float | datetime.datetime | None) -> float | None:
    """A unix time (a naive datetime is this machine's local time, as Python reads it)."""
    return when.timestamp() if isinstance(when, datetime.datetime) else when


def _status_of(desc: Description) -> AppStatus:
    """An app's status, or for a sweep one status for all its points."""
    if isinstance(desc, DescribeAppResponse):
        return desc.status
    return outcome.combined(desc.statuses())


__all__ = ["HandleQueries"]
