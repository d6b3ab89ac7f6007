"""Finding an app on the cluster: its objects (Jobs, a JobSet or a TrainJob), and Kueue's word.

An app id (``namespace:name``) does not say which target it was submitted as, so its objects
are looked for by label, Jobs first (the default and the only kind every cluster has; one
request), then JobSets and TrainJobs. A cluster without their CRDs answers 404, and an identity
without RBAC for them 403: both mean "not this kind" (the second is remembered, so "not
found" can say what could not be searched). Objects a controller made (a JobSet's Jobs, a
TrainJob's JobSet) are never apps themselves.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trainlaunch.schedulers.kubernetes import kueue
from trainlaunch.schedulers.kubernetes.client import ApiError, KubeApi, NotFound
from trainlaunch.schedulers.kubernetes.labels import WORKLOAD_OWNER_UID
from trainlaunch.schedulers.kubernetes.targets import APP_KINDS, CUSTOM_KINDS, is_owned, role_views

Objects = list[dict[str, Any]]


@dataclasses.dataclass
class Found:
    """The apps' objects of a search, and the kinds the identity may not list."""

    objects: Objects = dataclasses.field(default_factory=list)
    forbidden: list[str] = dataclasses.field(default_factory=list)

    @property
    def views(self) -> Objects:
        """One Job-like view per role of every object (what status.py reads)."""
        return [v for o in self.objects for v in role_views(o)]


def find(api: KubeApi, ns: str, selector: str, every_kind: bool = False) -> Found:
    """The app objects matching selector: of the first kind that has any (every_kind: all)."""
    found = Found()
    for kind in APP_KINDS:
        try:
            objs = api.list(kind, ns, selector)
        except NotFound:
            if kind not in CUSTOM_KINDS:
                raise
            continue  # the CRD is not installed: no such apps here
        except ApiError as e:
            if kind not in CUSTOM_KINDS or e.status != 403:
                raise
            found.forbidden.append(CUSTOM_KINDS[kind][1])
            continue
        found.objects += [{"kind": kind, **o} for o in objs if not is_owned(o)]
        if found.objects and not every_kind:
            break
    return found


def admission(api: KubeApi, obj: dict[str, Any]) -> str:
    """What Kueue says of a held object (kueue.held): where it waits for admission, and why."""
    queue = kueue.queue_of(obj) or ""
    meta = obj.get("metadata") or {}
    ns, uid = str(meta.get("namespace") or ""), str(meta.get("uid") or "")
    workload, why = None, ""
    for version in kueue.WORKLOAD_VERSIONS:
        try:
            items = api.list(
                "Workload", ns, f"{WORKLOAD_OWNER_UID}={uid}", f"{kueue.GROUP}/{version}"
            )
        except NotFound:
            why = "Kueue's Workloads are not served here: is Kueue installed?"
            continue
        except ApiError as e:
            why = f"cannot read Kueue's Workloads: {e}"
            break
        workload, why = (items[0] if items else None), ""
        break
    cluster_queue = None
    if workload is None or not ((workload.get("status") or {}).get("admission") or {}):
        try:
            local = api.get("LocalQueue", ns, queue)
            cluster_queue = (local.get("spec") or {}).get("clusterQueue")
        except NotFound:
            why = why or f"LocalQueue {queue} does not exist in namespace {ns}"
        except ApiError:
            pass  # not readable by this identity: say the LocalQueue instead
    return kueue.admission_message(queue, workload, cluster_queue, why)
