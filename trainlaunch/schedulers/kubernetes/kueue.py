"""Kueue: ``--cfg queue=NAME`` queues the app, and ``status`` says why it waits (pure).

The app's Job(s), JobSet or TrainJob get the label ``kueue.x-k8s.io/queue-name: NAME`` (a
LocalQueue of the namespace) and are created suspended (``spec.suspend: true``, as Kueue's
webhook would make them): nothing starts before Kueue admits its Workload, which Kueue labels
with the object's uid. While Kueue holds it, ``status`` is PENDING with "waiting for admission
in ClusterQueue X" (from the Workload, else the LocalQueue's ``spec.clusterQueue``, else the
LocalQueue's name when that is not readable) and Kueue's own reason. Workloads are read as
``kueue.x-k8s.io/v1beta2`` (Kueue 0.15+), else ``v1beta1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainlaunch.schedulers.kubernetes.labels import QUEUE_LABEL
from trainlaunch.schedulers.kubernetes.options import RenderOptions

GROUP = "kueue.x-k8s.io"
WORKLOAD_VERSIONS = ("v1beta2", "v1beta1")  # newest first


def queued(doc: dict[str, Any], opts: RenderOptions) -> dict[str, Any]:
    """doc (a Job, JobSet or TrainJob) in opts.queue: labelled and created suspended."""
    if not opts.queue:
        return doc
    meta = doc["metadata"]
    return {
        **doc,
        "metadata": {**meta, "labels": {**meta.get("labels", {}), QUEUE_LABEL: opts.queue}},
        "spec": {**doc["spec"], "suspend": True},  # Kueue unsuspends it on admission
    }


def queue_of(obj: Mapping[str, Any]) -> str | None:
    """The LocalQueue an object was queued in (None: not queued)."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) or None


def held(obj: Mapping[str, Any]) -> bool:
    """Whether Kueue holds the object: queued and still suspended."""
    return queue_of(obj) is not None and bool((obj.get("spec") or {}).get("suspend"))


def admission_message(
    queue: str,
    workload: Mapping[str, Any] | None,
    cluster_queue: str | None,
    why_unknown: str = "",
) -> str:
    """Why a held app waits: ``waiting for admission in ClusterQueue X: <Kueue's reason>``.

    cluster_queue: the LocalQueue's ClusterQueue when known; why_unknown: why it is not (the
    Workload or LocalQueue could not be read), said instead of guessing.
    """
    status = (workload or {}).get("status") or {}
    cq = (status.get("admission") or {}).get("clusterQueue") or cluster_queue
    where = f"ClusterQueue {cq}" if cq else f"LocalQueue {queue}"
    text = f"waiting for admission in {where}"
    if workload is None:
        return f"{text} ({why_unknown or 'Kueue has not made its Workload yet'})"
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    evicted = conditions.get("Evicted") or {}
    if evicted.get("status") == "True":
        return f"{text} (evicted: {_reason(evicted)})"
    admitted = conditions.get("Admitted") or {}
    if admitted.get("status") == "True":
        return f"admitted by {where}; starting"
    reserved = conditions.get("QuotaReserved") or {}
    if reserved.get("status") == "False" and _reason(reserved):
        return f"{text}: {_reason(reserved)}"
    return text


def _reason(condition: Mapping[str, Any]) -> str:
    return str(condition.get("message") or condition.get("reason") or "")
