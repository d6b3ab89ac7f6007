"""The Scheduler protocol every backend implements, and the values it returns.

A backend is one module exposing ``create_scheduler(session_name, **params) -> Scheduler``.
``submit_dryrun`` is pure (AppDef + resolved cfg -> the exact request); ``schedule`` is the
only write. Unknown apps raise :class:`~trainlaunch.errors.AppNotFound`; backend command
failures raise :class:`~trainlaunch.errors.SchedulerError` with the command's own message.
"""

from __future__ import annotations

import abc
import builtins
import dataclasses
import enum
import os
import string
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainlaunch.errors import SchedulerError, UsageError
from trainlaunch.specs import (
    MAX_REPLICAS,
    AppDef,
    AppDryRunInfo,
    AppState,
    AppStatus,
    CfgVal,
    runopts,
)

if TYPE_CHECKING:  # annotations only: stacks is imported where stacks are read
    from trainlaunch.stacks import RankStack


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


@dataclasses.dataclass(frozen=True)
class DescribeAppResponse:
    """Everything a backend knows about one app."""

    app_id: str
    status: AppStatus
    app: AppDef | None = None  # the AppDef as submitted, when the backend recorded it
    cfg: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # seed, log_dir, ...

    @property
    def state(self) -> AppState:
        """Shortcut for status.state."""
        return self.status.state


@dataclasses.dataclass(frozen=True)
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
        raise SchedulerError(f"the {self.backend} backend has no job arrays")

    def default_metrics_path(self, cfg: Mapping[str, CfgVal]) -> str | None:
        """Where metrics go when the user does not say (may contain ``${app_id}``)."""
        return None

    def metrics_location(self, resp: DescribeAppResponse) -> str | None:
        """A dir, file or glob on this machine with the app's metrics files (None: unknown).

        By default the recorded metrics path, a relative one taken from the app's working
        directory (``metadata["cwd"]``, or its place in the code snapshot the ranks ran from)
        as its ranks did. A backend whose ranks write where
        this machine cannot read raises UsageError saying where the metrics are.
        """
        path = recorded_metrics_path(resp)
        cwd = resp.metadata.get("cwd")
        snap = resp.metadata.get("snapshot")
        if isinstance(snap, dict) and isinstance(snap.get("path"), str):  # ranks ran in the copy
            cwd = os.path.join(snap["path"], str(snap.get("cwd_rel") or "."))
        if path and not os.path.isabs(path) and isinstance(cwd, str) and cwd:
            slash = "/" if path.endswith("/") else ""  # a directory stays one
            path = os.path.normpath(os.path.join(cwd, path)) + slash
        return path

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

    def cancel_many(self, app_ids: Sequence[str]) -> None:
        """Stop several apps, in this order (a backend may stop them all at once)."""
        for app_id in app_ids:
            self.cancel(app_id)

    def requeue(self, app_id: str) -> None:
        """Preempt the app now: warn its ranks, stop it, run it again (max_requeues)."""
        raise UsageError(
            f"the {self.backend} backend cannot requeue an app on request",
            hint="`trainlaunch stop --requeue` works on the local and slurm backends",
        )

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
        raise NotImplementedError(f"{self.backend} does not support logs")

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
        raise SchedulerError(f"`stack` is not supported by the {self.backend} backend")

    def close(self) -> None:  # noqa: B027 (optional hook, deliberately not abstract)
        """Release resources (nothing by default)."""


def recorded_metrics_path(resp: DescribeAppResponse) -> str | None:
    """The metrics path the app's ranks got (``${app_id}`` filled, ``{rank}`` as ``*``)."""
    recorded: dict[str, Any] = {}
    if resp.app is not None:
        recorded = dict(resp.app.metadata.get("trainlaunch") or {})
    path = recorded.get("metrics_path") or (resp.metadata.get("settings") or {}).get("metrics_path")
    if not path:
        return None
    path = string.Template(str(path)).safe_substitute(app_id=resp.app_id)
    return os.path.expanduser(path).replace("{rank}", "*")
