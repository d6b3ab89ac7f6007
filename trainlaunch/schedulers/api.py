"""The Scheduler protocol every backend implements, and the values it returns.

A backend is one module exposing ``create_scheduler(session_name, **params) -> Scheduler``
and ``CAPABILITIES`` (what it offers of the optional members; the CLI asks, it never names a
backend). ``submit_dryrun`` is pure (AppDef + resolved cfg -> the exact request); ``schedule``
is the only write. Unknown apps raise :class:`~trainlaunch.errors.AppNotFound`; backend
command failures raise :class:`~trainlaunch.errors.SchedulerError` with the command's own
message; an optional member a backend does not offer raises
:class:`~trainlaunch.errors.Unsupported` (exit 3), the same way everywhere.
"""

from __future__ import annotations

import abc
import builtins
import dataclasses
import enum
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainlaunch.diagnosis.values import Diagnosis
from trainlaunch.errors import Unsupported, UsageError
from trainlaunch.metrics.location import metrics_path
from trainlaunch.schedulers.capabilities import Capabilities
from trainlaunch.specs import (
    MAX_REPLICAS,
    AppDef,
    AppDryRunInfo,
    AppState,
    AppStatus,
    CfgVal,
    runopts,
)
from trainlaunch.values import frozen

if TYPE_CHECKING:  # annotations only: stacks is imported where stacks are read
    from trainlaunch.stacks.values import RankStack


def check_params(backend: str, params: Mapping[str, Any], accepted: frozenset[str]) -> None:
    """The one rule for create_scheduler's params: an unknown one is a UsageError."""
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise UsageError(
            f"unknown {backend} scheduler parameter(s): {', '.join(unknown)}; "
            f"valid: {', '.join(sorted(accepted)) or '(none)'}"
        )


class Stream(str, enum.Enum):
    """Which output stream of a replica to read."""

    STDOUT = "stdout"
    STDERR = "stderr"
    COMBINED = "combined"


@frozen
class DescribeAppResponse:
    """Everything a backend knows about one app: typed fields for what every backend may know,
    ``metadata`` for what only this backend does (job_dir, namespace, ...)."""

    app_id: str
    status: AppStatus
    app: AppDef | None = None  # the AppDef as submitted, when the backend recorded it
    cfg: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # the backend's own
    log_dir: str | None = None  # the directory of the replicas' log files, where there is one
    created: float | None = None  # unix time of the submission
    cwd: str | None = None  # the directory it was submitted from (its replicas' working dir)
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # rank settings (seed)
    snapshot: Mapping[str, Any] | None = None  # its code snapshot (schedulers/snapshot.py)
    stall: str = ""  # "stalled for 12m: ..." while a running app makes no progress
    progress: Sequence[Mapping[str, Any]] | None = None  # running: each rank's last progress
    hang: Mapping[str, Any] | None = None  # the hang watchdog's last record (docs/hangs.md)
    preflight: Mapping[str, Any] | None = None  # node 0's agent's verdict (docs/preflight.md)
    waiting: Mapping[str, Any] | None = None  # a node agent waits for late nodes (docs/ddp.md)
    failure: Diagnosis | None = None  # why it failed or was stopped (docs/failures.md)

    @property
    def state(self) -> AppState:
        """Shortcut for status.state."""
        return self.status.state

    @property
    def is_terminal(self) -> bool:
        """Shortcut for status.is_terminal: nothing more will happen to the app."""
        return self.status.is_terminal


@frozen
class ListAppResponse:
    """One row of ``list``."""

    app_id: str
    state: AppState
    app_handle: str
    name: str = ""
    created: float | None = None  # unix time
    msg: str = ""  # e.g. why a record is unreadable


class Scheduler(abc.ABC):
    """A scheduler backend."""

    backend: str = ""
    max_replicas: int = MAX_REPLICAS  # the most replicas (nodes, processes) one app may have
    capabilities: Capabilities = Capabilities()  # set from the module's CAPABILITIES

    def __init__(self, session_name: str) -> None:
        self.session_name = session_name

    # -- schema -----------------------------------------------------------------------------
    @abc.abstractmethod
    def run_opts(self) -> runopts:
        """The typed options this backend accepts."""

    # -- submission --------------------------------------------------------------------------
    @abc.abstractmethod
    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo:
        """Render the exact request (pure: no submission); cfg is already resolved."""

    @abc.abstractmethod
    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        """Submit the rendered request; return the app id."""

    def submit_array_dryrun(
        self, infos: Sequence[AppDryRunInfo], max_parallel: int | None = None
    ) -> AppDryRunInfo | str:
        """One request submitting these dry-run apps together as a job array (at most
        max_parallel running), or why not ('': this backend has no arrays; submit each)."""
        return ""

    def schedule_array(self, dryrun_info: AppDryRunInfo) -> builtins.list[str]:
        """Submit a submit_array_dryrun request; the app ids, one per app, in order."""
        raise unsupported(self.backend, "arrays", "job arrays")

    def default_metrics_path(self, cfg: Mapping[str, CfgVal]) -> str | None:
        """Where metrics go when the user does not say (may contain ``${app_id}``)."""
        return None

    def metrics_location(self, resp: DescribeAppResponse) -> str | None:
        """A dir, file or glob on this machine with the app's metrics files (None: unknown).

        By default the recorded metrics path, a relative one taken from the app's working
        directory (``cwd``, or its place in the code snapshot the ranks ran from) as its
        ranks did: the one rule of metrics/location.py. A backend whose ranks write where
        this machine cannot read raises UsageError saying where the metrics are.
        """
        return metrics_path(resp.app_id, resp.app, resp.settings, resp.snapshot, resp.cwd)

    # -- queries -----------------------------------------------------------------------------
    @abc.abstractmethod
    def describe(self, app_id: str) -> DescribeAppResponse:
        """Status and recorded definition of one app; AppNotFound if unknown."""

    def session_of(self, app_id: str) -> str | None:
        """The session the app was submitted in, as its handle shows it (None: not recorded)."""
        return None

    @abc.abstractmethod
    def list(self) -> list[ListAppResponse]:
        """The apps this backend knows that trainlaunch started, newest first (created, app id)."""

    @abc.abstractmethod
    def cancel(self, app_id: str) -> None:
        """Stop the app (all its processes); AppNotFound if unknown."""

    def interrupt(self, app_id: str) -> None:
        """Stop the app as Ctrl-C stops torchrun: its ranks get SIGINT first, so their
        ``except KeyboardInterrupt`` runs, then the stop signal and SIGKILL; AppNotFound if
        unknown. A backend that cannot send SIGINT first stops it as cancel does."""
        self.cancel(app_id)

    def cancel_many(self, app_ids: Sequence[str]) -> None:
        """Stop several apps, in this order (a backend may stop them all at once)."""
        for app_id in app_ids:
            self.cancel(app_id)

    def describe_queued(self, app_ids: Sequence[str]) -> dict[str, DescribeAppResponse]:
        """Descriptions of those of app_ids that wait for a slot, answered together where the
        backend can do it cheaply (a sweep's queued points); the others are left out."""
        return {}

    def close_slot_group(self, name: str) -> None:
        """Stop a slot group (specs.SlotGroup): none of its apps that wait for a slot starts
        any more (they end CANCELLED); the running ones are stopped by cancel. A backend
        without slot groups has none to close."""
        return None

    def requeue(self, app_id: str) -> None:
        """Preempt the app now: warn its ranks, stop it, run it again (max_requeues)."""
        raise unsupported(self.backend, "requeue", "requeuing an app on request")

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: float | None = None,
        until: float | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterator[str]:
        """Lines of replica k of role_name (without trailing newline).

        With should_tail, keep yielding new lines until the app is terminal.
        """
        raise unsupported(self.backend, "logs", "logs")

    def log_files(
        self, app_id: str, role_name: str, k: int = 0, streams: Stream | None = None
    ) -> builtins.list[Path] | None:
        """Local files holding replica k's whole log, when the backend has them (fast path)."""
        return None

    def log_replicas(self, app_id: str, role_name: str) -> builtins.list[int]:
        """Replica ids of a role that have logs (default: all declared replicas)."""
        resp = self.describe(app_id)
        if resp.app is None:
            return [0]
        return list(range(resp.app.role(role_name).num_replicas))

    def stacks(self, app_id: str, native: bool = False) -> builtins.list[RankStack]:
        """Every rank's stack right now (py-spy dumps taken together); see docs/hangs.md."""
        raise unsupported(self.backend, "stacks", "`stack`")

    def warm_up(self) -> None:  # noqa: B027 (optional hook, deliberately not abstract)
        """An app is about to be submitted: start now what its submission will need (the
        local backend: its supervisor's interpreter); close() lets go of what was not used.
        Nothing by default."""

    def close(self) -> None:  # noqa: B027 (optional hook, deliberately not abstract)
        """Release resources (nothing by default)."""


def hang_fields(meta: Mapping[str, Any]) -> dict[str, Any]:
    """DescribeAppResponse's stall, progress and hang from a watchdog view's keys."""
    return {
        "stall": str(meta.get("stall") or ""),
        "progress": meta.get("progress"),
        "hang": meta.get("hang") or None,
    }


def unsupported(backend: str, capability: str, what: str) -> Unsupported:
    """The one error for an optional member a backend does not offer; the hint names those
    that do (from their declared capabilities)."""
    from trainlaunch import schedulers  # the registry: only on this error

    able = [n for n in schedulers.with_capability(capability) if n != backend]
    return Unsupported(
        f"the {backend} backend does not support {what}",
        hint=f"backends that do: {', '.join(able)}" if able else None,
    )
