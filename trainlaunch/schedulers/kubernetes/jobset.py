"""``api=jobset``: the app as one JobSet (``jobset.x-k8s.io/v1alpha2``), a replicated Job per role.

Each role is a replicated Job with ``replicas: 1``: its one child Job ``<name>-<role>-0`` is the
role's Indexed Job (roles.py), so replica k is the pod ``<name>-<role>-0-<k>``, resolvable at
``<name>-<role>-0-<k>.<name>.<namespace>.svc`` through the headless Service the JobSet controller
makes (``network.enableDNSHostnames``, named after the JobSet). JobSet itself decides success
(``successPolicy: All``: every role completes) and failure: at a counted failure the child Job
fails at once, and the JobSet restarts all its Jobs together up to ``maxRestarts`` (the roles'
``max_retries``); a pod that ran out of requeues (exit 76) fails the JobSet without a restart.
Read back, a JobSet is one Job-like view per role (``role_views``), so status, describe and
logs work as on the Job target. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainlaunch.schedulers.kubernetes.labels import ANN_APP_NAME
from trainlaunch.schedulers.kubernetes.options import RenderOptions
from trainlaunch.schedulers.kubernetes.roles import RenderedRoles
from trainlaunch.specs import AppDef, RetryPolicy

API_VERSION = "jobset.x-k8s.io/v1alpha2"
PLURAL = "jobsets"
RULE_REQUEUES = "requeues_exhausted"  # failure policy rule names: ^[A-Za-z]([A-Za-z0-9_,:]*...)
FAIL_JOBSET_REASON = "FailJobSetFailurePolicyAction"  # the Failed condition's reason then
# JobSet condition types -> the Job condition types status.py maps
_CONDITIONS = {"Completed": "Complete", "Failed": "Failed", "Suspended": "Suspended"}


def render(app: AppDef, name: str, rendered: RenderedRoles, opts: RenderOptions) -> dict[str, Any]:
    """The JobSet of the app's roles."""
    replicated = []
    for rj in rendered.jobs:
        replicated.append(
            {
                "name": rj.label,
                "replicas": 1,
                # no trainlaunch labels on the child Jobs: the JobSet is the app's object;
                # the pods keep theirs (pod template), so logs and status find them
                "template": {
                    "metadata": {"annotations": dict(rj.job["metadata"]["annotations"])},
                    "spec": rj.job["spec"],
                },
            }
        )
    restarts = max(
        (
            r.role.max_retries
            for r in rendered.jobs
            if r.role.retry_policy is not RetryPolicy.REPLICA
        ),
        default=0,
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": opts.namespace,
            "labels": dict(rendered.labels),
            "annotations": {**opts.annotations, ANN_APP_NAME: app.name},
        },
        "spec": {**policies(restarts, opts), "replicatedJobs": replicated},
    }


def policies(max_restarts: int, opts: RenderOptions) -> dict[str, Any]:
    """A JobSet's network, success and failure policies (trainlaunch's runtime has them too):
    DNS names for every pod, done when every Job is, restarted as a whole after a failure."""
    failure: dict[str, Any] = {"maxRestarts": max_restarts}
    if opts.per_index:  # the Jobs' FailJob rule (exit 76): out of requeues, no restart helps
        failure["rules"] = [
            {
                "name": RULE_REQUEUES,
                "action": "FailJobSet",
                "onJobFailureReasons": ["PodFailurePolicy"],
            }
        ]
    return {
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All"},
        "failurePolicy": failure,
    }


def role_views(jobset: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per replicated Job, a Job as status.py reads one: its spec, the JobSet's verdict."""
    meta = jobset.get("metadata") or {}
    spec = jobset.get("spec") or {}
    status = jobset.get("status") or {}
    ready = {r.get("name"): r.get("ready", 0) for r in status.get("replicatedJobsStatus") or []}
    conditions = [
        _condition(c) for c in status.get("conditions") or [] if c.get("type") in _CONDITIONS
    ]
    views = []
    for rj in spec.get("replicatedJobs") or []:
        template = rj.get("template") or {}
        job_spec = dict(template.get("spec") or {})
        pod_meta = (job_spec.get("template") or {}).get("metadata") or {}
        if spec.get("suspend"):
            job_spec["suspend"] = True
        views.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    **{
                        k: v
                        for k, v in meta.items()
                        if k in ("namespace", "uid", "creationTimestamp", "deletionTimestamp")
                    },
                    "name": f"{meta.get('name')}-{rj.get('name')}-0",
                    "labels": dict(pod_meta.get("labels") or {}),
                    "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
                },
                "spec": job_spec,
                "status": {
                    "conditions": conditions,
                    "ready": ready.get(rj.get("name"), 0),
                    "failed": int(status.get("restarts") or 0),  # whole restarts: retries
                },
            }
        )
    return views


def _condition(c: Mapping[str, Any]) -> dict[str, Any]:
    out = {**c, "type": _CONDITIONS[str(c.get("type"))]}
    if c.get("reason") == FAIL_JOBSET_REASON:  # our only FailJobSet rule: say what it means
        out["message"] = (
            f"{c.get('message') or ''} (rule {RULE_REQUEUES}: a Job failed by its "
            "podFailurePolicy, a pod's exit code 76 matching FailJob rule)"
        ).strip()
    return out
