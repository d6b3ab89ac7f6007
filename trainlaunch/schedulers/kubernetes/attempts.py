"""Requeues and the history of attempts, from the pods of per-index Jobs (pure).

With ``backoffLimitPerIndex`` (Kubernetes 1.29+) the Job controller annotates each pod with its
index's failures and ignored failures (requeues) before it; their sum is the attempt the pod
ran (``TRAINLAUNCH_RESTART_COUNT`` in its ranks). Pods of the same attempt number make one
attempt of the history: why it ended (the most telling pod), when it started and ended. Pods
without the annotations (older clusters, older manifests) give no history.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any

from trainlaunch import settings
from trainlaunch.schedulers.kubernetes.labels import FAILURES_ANNOTATION, REQUEUES_ANNOTATION
from trainlaunch.specs import Attempt

# Set by the Job controller on a Job a podFailurePolicy rule failed:
# "Container C for pod NS/P failed with exit code 76 matching FailJob rule at index 2".
_FAILJOB = re.compile(r"exit code (\d+) matching FailJob rule")
# How telling a pod's end is for its attempt (lower wins): the cause before its echoes.
_PRIORITY = ("preempted", "requeue requested", "failed", "requeues exhausted", "succeeded")


def requeues_exhausted(job: Mapping[str, Any], message: str) -> str:
    """The Job failure message, spelled out when the agent's FailJob code ended the Job."""
    m = _FAILJOB.search(message)
    if not m or int(m[1]) != settings.REQUEUES_EXHAUSTED_EXIT_CODE:
        return message
    limit = _template_env(job).get(settings.MAX_REQUEUES, "?")
    return (
        f"requeues exhausted: a replica was preempted or asked for a requeue more than "
        f"max_requeues={limit} times ({message})"
    )


def _template_env(job: Mapping[str, Any]) -> dict[str, str]:
    spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = spec.get("containers") or [{}]
    return {
        str(e.get("name")): str(e.get("value"))
        for e in containers[0].get("env") or []
        if "value" in e
    }


def _count(pod: Mapping[str, Any], key: str) -> int | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(key)
    if raw is None:
        return None
    return int(raw) if str(raw).isdigit() else None


def pod_attempt(pod: Mapping[str, Any]) -> int | None:
    """The attempt a pod ran (None without the controller's count annotation)."""
    failures = _count(pod, FAILURES_ANNOTATION)
    if failures is None:
        return None
    return failures + (_count(pod, REQUEUES_ANNOTATION) or 0)


def _terminated(pod: Mapping[str, Any]) -> dict[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        t = (cs.get("state") or {}).get("terminated")
        if t:
            return dict(t)
    return {}


def _disruption(pod: Mapping[str, Any]) -> str | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True":
            return str(c.get("reason") or "DisruptionTarget")
    return None


def pod_end(pod: Mapping[str, Any]) -> tuple[str, int | None]:
    """Why a pod ended ('' while it runs) and its exit code."""
    phase = (pod.get("status") or {}).get("phase")
    code = _terminated(pod).get("exitCode")
    if phase == "Succeeded":
        return "succeeded", code
    if phase != "Failed":
        return "", code
    if why := _disruption(pod):
        return f"preempted ({why}; requeued)", code
    if code == settings.REQUEUE_EXIT_CODE:
        return f"requeue requested (exit {code})", code
    if code == settings.REQUEUES_EXHAUSTED_EXIT_CODE:
        return f"requeues exhausted (exit {code})", code
    return (f"failed (exit {code})" if code is not None else "failed"), code


def num_requeues(pods: list[dict[str, Any]]) -> int:
    """The app's requeues: the most any replica had (a requeue reaches every replica)."""
    most = 0
    for pod in pods:
        before = _count(pod, REQUEUES_ANNOTATION) or 0
        reason, _ = pod_end(pod)
        ended_as = reason.startswith(("preempted", "requeue requested"))
        most = max(most, before + ended_as)
    return most


def history(pods: list[dict[str, Any]]) -> tuple[Attempt, ...]:
    """Attempts, oldest first, from the pods' attempt numbers (() without them)."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for pod in pods:
        n = pod_attempt(pod)
        if n is None:
            return ()
        groups.setdefault(n, []).append(pod)
    out = []
    for n in sorted(groups):
        ends = [pod_end(p) for p in groups[n]]
        ended = [e for e in ends if e[0]]
        reason, code = "", None
        # over once every pod ended, or as soon as one ended it early (failed, requeued)
        if ended and (len(ended) == len(ends) or any(e[0] != "succeeded" for e in ended)):
            reason, code = min(ended, key=lambda e: _rank(e[0]))
        starts = [_time((p.get("status") or {}).get("startTime")) for p in groups[n]]
        finished = [_time(_terminated(p).get("finishedAt")) for p in groups[n]]
        known_starts = [s for s in starts if s is not None]
        known_ends = [f for f in finished if f is not None]
        out.append(
            Attempt(
                attempt=n,
                reason=reason,
                start=min(known_starts) if known_starts else None,
                end=max(known_ends) if reason and known_ends else None,
                exit_code=code,
            )
        )
    return tuple(out)


def _rank(reason: str) -> int:
    for i, prefix in enumerate(_PRIORITY):
        if reason.startswith(prefix):
            return i
    return len(_PRIORITY)


def _time(text: Any) -> float | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
