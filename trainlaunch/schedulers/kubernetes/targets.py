"""The three objects an app can be (Job, JobSet, TrainJob): where they live in the API, and how
each reads as one Job per role, which is what status, describe and logs work on (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainlaunch.schedulers.kubernetes import jobset, kueue, trainjob

# The kinds an app can be, in the order apps are looked for (Jobs: the default, no CRD)
APP_KINDS = ("Job", "JobSet", "TrainJob")
# Custom resources trainlaunch creates or reads: kind -> (apiVersion, plural); their CRDs are
# installed with their controllers, so a plain cluster answers 404 for them
CUSTOM_KINDS: dict[str, tuple[str, str]] = {
    "JobSet": (jobset.API_VERSION, jobset.PLURAL),
    "TrainJob": (trainjob.API_VERSION, trainjob.PLURAL),
    "Workload": (f"{kueue.GROUP}/{kueue.WORKLOAD_VERSIONS[0]}", "workloads"),
    "LocalQueue": (f"{kueue.GROUP}/{kueue.WORKLOAD_VERSIONS[0]}", "localqueues"),
}


def role_views(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One Job-like object per role: a Job is its own; a JobSet and a TrainJob have their roles'."""
    kind = obj.get("kind")
    if kind == "JobSet":
        return jobset.role_views(obj)
    if kind == "TrainJob":
        return trainjob.role_views(obj)
    return [dict(obj)]


def is_owned(obj: Mapping[str, Any]) -> bool:
    """Whether a controller made it (a JobSet's Job, a TrainJob's JobSet): not an app itself."""
    return any(
        r.get("controller") for r in (obj.get("metadata") or {}).get("ownerReferences") or []
    )
