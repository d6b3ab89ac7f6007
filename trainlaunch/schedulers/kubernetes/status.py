"""Pure status mapping: Jobs and their pods (API JSON) -> AppStatus.

Terminal states come only from Job conditions (the controller's verdict). Before that, the
pods say why an app waits: ``Unschedulable`` with the scheduler's message, ``ErrImagePull``,
``ImagePullBackOff``, ... instead of an unexplained PENDING. Anything unrecognised maps to
UNKNOWN, never to a crash.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from trainlaunch.schedulers.kubernetes import attempts
from trainlaunch.schedulers.kubernetes.labels import (
    ANN_ROLE_INDEX,
    ANN_ROLE_NAME,
    INDEX_ANNOTATION,
    LABEL_ROLE,
)
from trainlaunch.specs import AppState, AppStatus, ReplicaStatus, RoleStatus

# A Job condition with status "True" decides the role's state (first match in this order).
JOB_CONDITION_STATE: dict[str, AppState] = {
    "Failed": AppState.FAILED,
    "FailureTarget": AppState.FAILED,  # set before Failed, while pods are still terminating
    "Complete": AppState.SUCCEEDED,
    "SuccessCriteriaMet": AppState.SUCCEEDED,
    "Suspended": AppState.PENDING,  # queued, e.g. by Kueue
}
POD_PHASE_STATE: dict[str, AppState] = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Succeeded": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Unknown": AppState.UNKNOWN,
}
# Waiting reasons that mean "stuck until someone acts", worth showing before ordinary ones.
STUCK_REASONS = frozenset(
    {
        "Unschedulable",
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)


def app_status(jobs: list[dict[str, Any]], pods: list[dict[str, Any]]) -> AppStatus:
    """The status of one app from all its Jobs (one per role) and all its pods."""
    roles: list[RoleStatus] = []
    states: list[AppState] = []
    msgs: list[str] = []
    restarts = 0
    for job in sorted(jobs, key=role_index):
        role = job_role_name(job)
        job_pods = [p for p in pods if _labels(p).get(LABEL_ROLE) == _labels(job).get(LABEL_ROLE)]
        state, msg, replicas = role_status(job, job_pods)
        roles.append(RoleStatus(role, replicas))
        states.append(state)
        restarts += int((job.get("status") or {}).get("failed") or 0)
        if msg:
            msgs.append(f"{role}: {msg}" if len(jobs) > 1 else msg)
    state = combine(states)
    failed = [r for rs in roles for r in rs.replicas if r.state == AppState.FAILED]
    exit_code = failed[0].exit_code if state == AppState.FAILED and failed else None
    return AppStatus(
        state=state,
        num_restarts=restarts,
        msg="; ".join(msgs),
        roles=tuple(roles),
        exit_code=exit_code,
        num_requeues=attempts.num_requeues(pods),
        attempts=attempts.history(pods),
    )


def combine(states: Iterable[AppState]) -> AppState:
    """The app's state from its roles' states."""
    states = list(states)
    for decisive in (AppState.FAILED, AppState.CANCELLED):
        if decisive in states:
            return decisive
    if states and all(s == AppState.SUCCEEDED for s in states):
        return AppState.SUCCEEDED
    for s in (AppState.RUNNING, AppState.UNKNOWN):
        if s in states:
            return s
    return AppState.PENDING


def role_status(
    job: Mapping[str, Any], pods: list[dict[str, Any]]
) -> tuple[AppState, str, tuple[ReplicaStatus, ...]]:
    """State, message and replicas of the role run by one Job."""
    role = job_role_name(job)
    n = int((job.get("spec") or {}).get("completions") or 1)
    by_index: dict[int, list[dict[str, Any]]] = {}
    for pod in pods:
        index = pod_index(pod)
        if index is not None:
            by_index.setdefault(index, []).append(pod)
    replicas = tuple(replica_status(role, k, by_index.get(k, [])) for k in range(n))
    state, msg = job_state(job)
    if state is not None:
        failed = [r for r in replicas if r.state == AppState.FAILED]
        if state == AppState.FAILED and failed:  # name one failed replica: the lowest index
            msg = f"{msg}; {failure(failed[0])}"
        return state, msg, replicas
    states = [r.state for r in replicas]
    if AppState.RUNNING in states:
        state = AppState.RUNNING
    elif AppState.UNKNOWN in states:
        state = AppState.UNKNOWN
    elif all(s == AppState.SUCCEEDED for s in states):
        state = AppState.RUNNING  # the controller has not yet marked the Job complete
    else:
        state = AppState.PENDING
    return state, _waiting(replicas), replicas


def job_state(job: Mapping[str, Any]) -> tuple[AppState | None, str]:
    """The state a Job's conditions decide (None while they decide nothing)."""
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return AppState.CANCELLED, "being deleted"
    true = {
        c.get("type"): c
        for c in (job.get("status") or {}).get("conditions") or []
        if c.get("status") == "True"
    }
    for kind, state in JOB_CONDITION_STATE.items():
        if kind in true:
            c = true[kind]
            text = ": ".join(x for x in (c.get("reason"), c.get("message")) if x)
            return state, attempts.requeues_exhausted(job, text) or kind
    return None, ""


def list_state(job: Mapping[str, Any]) -> AppState:
    """A cheap state for ``list`` from the Job alone (no pods read)."""
    state, _ = job_state(job)
    if state is not None:
        return state
    return AppState.RUNNING if (job.get("status") or {}).get("ready") else AppState.PENDING


def replica_status(role: str, k: int, pods: list[dict[str, Any]]) -> ReplicaStatus:
    """Replica k from its newest pod; earlier pods of the same index were retries."""
    if not pods:
        return ReplicaStatus(id=k, state=AppState.PENDING, role=role, message="no pod yet")
    pods = sorted(pods, key=lambda p: (_created(p), p.get("metadata", {}).get("name", "")))
    pod = pods[-1]
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    state = POD_PHASE_STATE.get(status.get("phase", ""), AppState.UNKNOWN)
    exit_code, message = None, ""
    s = _container_state(spec, status)
    if "terminated" in s:
        t = s["terminated"]
        exit_code = t.get("exitCode")
        message = (t.get("message") or t.get("reason") or "").strip()
    elif "waiting" in s:
        w = s["waiting"]
        message = ": ".join(x for x in (w.get("reason"), w.get("message")) if x)
    if state == AppState.PENDING:
        message = _unschedulable(status) or message or "waiting to start"
    if status.get("reason") and state == AppState.FAILED:  # Evicted, DeadlineExceeded, ...
        message = ": ".join(x for x in (status["reason"], status.get("message")) if x)
    host = spec.get("hostname", "")
    hostname = f"{host}.{spec['subdomain']}" if host and spec.get("subdomain") else host
    return ReplicaStatus(
        id=k,
        state=state,
        role=role,
        hostname=hostname or _name(pod),
        exit_code=exit_code,
        restarts=len(pods) - 1,
        message=message,
    )


def job_role_name(job: Mapping[str, Any]) -> str:
    """The trainlaunch role name a Job runs (falls back to the Job's name)."""
    meta = job.get("metadata") or {}
    return str((meta.get("annotations") or {}).get(ANN_ROLE_NAME) or meta.get("name", ""))


def created(obj: Mapping[str, Any]) -> float | None:
    """metadata.creationTimestamp as unix time."""
    text = _created(obj)
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _container_state(spec: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """The state of the replica's container (the pod's first; injected sidecars come later)."""
    name = ((spec.get("containers") or [{}])[0]).get("name")
    statuses = status.get("containerStatuses") or []
    for cs in statuses:
        if name is None or cs.get("name") == name:
            return dict(cs.get("state") or {})
    return dict(statuses[0].get("state") or {}) if statuses else {}


def _unschedulable(status: Mapping[str, Any]) -> str:
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return ": ".join(x for x in (c.get("reason"), c.get("message")) if x)
    return ""


def _waiting(replicas: tuple[ReplicaStatus, ...]) -> str:
    waiting = [r for r in replicas if r.state == AppState.PENDING]
    if not waiting:
        failed = [r for r in replicas if r.state == AppState.FAILED]
        return f"{failure(failed[0])}; waiting for its retry" if failed else ""
    stuck = [r for r in waiting if r.message.split(":")[0] in STUCK_REASONS]
    first = (stuck or waiting)[0]
    return f"{len(waiting)}/{len(replicas)} replicas pending; replica {first.id}: {first.message}"


def failure(r: ReplicaStatus) -> str:
    code = f" exited with code {r.exit_code}" if r.exit_code is not None else " failed"
    return f"replica {r.id}{code}" + (f" ({r.message})" if r.message else "")


def pod_index(pod: Mapping[str, Any]) -> int | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(INDEX_ANNOTATION)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def role_index(job: Mapping[str, Any]) -> int:
    """The position of the Job's role in the AppDef."""
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(ANN_ROLE_INDEX, "0")
    return int(raw) if str(raw).isdigit() else 0


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _created(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("creationTimestamp") or "")


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))
