"""Every target's roles as Indexed Jobs: identity, labels, annotations, pod template, retries.

Whatever the target (``api=job|jobset|trainjob``), each role's replicas are the pods of one
Indexed Job (``completions = parallelism = num_replicas``): replica k is the pod with
completion index k. Only the names, the DNS names and who retries differ: the Job target's
Jobs retry themselves; a JobSet restarts as a whole (its failurePolicy), so its Jobs stop at the
first failure; a TrainJob's JobSet comes from the ClusterTrainingRuntime. Pure.
"""

from __future__ import annotations

import json
from typing import Any

from trainlaunch import settings
from trainlaunch.errors import UsageError
from trainlaunch.handles import make_app_handle
from trainlaunch.schedulers.kubernetes.image import agent_configmap, runs_agent
from trainlaunch.schedulers.kubernetes.labels import (
    ANN_APP_NAME,
    ANN_CODE,
    ANN_ROLE,
    ANN_ROLE_INDEX,
    ANN_ROLE_NAME,
    FAILURES_ANNOTATION,
    JOBSET_RESTARTS,
    LABEL_APP,
    LABEL_MANAGED_BY,
    LABEL_ROLE,
    LABEL_SESSION,
)
from trainlaunch.schedulers.kubernetes.metrics import ANN_METRICS, metrics_record
from trainlaunch.schedulers.kubernetes.names import (
    BACKEND,
    TRAINJOB_NODE,
    job_name,
    rank0_host,
    role_labels,
    session_label,
    subdomain,
)
from trainlaunch.schedulers.kubernetes.options import RenderOptions
from trainlaunch.schedulers.kubernetes.pod import (
    REPLICA_SENTINEL,
    PodParts,
    pod_template,
    substituted,
)
from trainlaunch.schedulers.kubernetes.secret import check_value, masked, secret_doc, secret_keys
from trainlaunch.specs import RUN_RECORD_KEY as META_KEY
from trainlaunch.specs import AppDef, RetryPolicy, Role
from trainlaunch.values import frozen

Doc = dict[str, Any]


@frozen
class RoleJob:
    """One role: the Role as submitted, its label, and the Job that runs its replicas."""

    role: Role
    label: str
    job: Doc  # a batch/v1 Job, as the Job target creates it


@frozen
class RenderedRoles:
    """An app's roles and the objects its first object owns (agent ConfigMap, Secret)."""

    jobs: list[RoleJob]
    owned: list[Doc]
    labels: dict[str, str]  # the app's labels (without a role)


def render_roles(
    app: AppDef, name: str, session: str, opts: RenderOptions, agent_zipapp: bytes | None
) -> RenderedRoles:
    """Each role's Job for opts.api, and the ConfigMap and Secret of the app."""
    api = opts.api
    labels_of = role_labels(app, name, api)
    first = labels_of[app.roles[0].name]
    app_id = f"{opts.namespace}:{name}"
    identity = {
        settings.APP_ID: app_id,
        settings.HANDLE: make_app_handle(BACKEND, session, app_id),
        settings.RANK0_HOST: rank0_host(api, name, first, opts.namespace),
        settings.RDZV_PORT: str(opts.rdzv_port),
    }
    bundled = opts.agent == "bundled" and any(runs_agent(r) for r in app.roles)
    if bundled and agent_zipapp is None:
        raise ValueError("render_roles: the bundled agent needs agent_zipapp")
    app_labels = {
        **opts.labels,
        LABEL_MANAGED_BY: "trainlaunch",
        LABEL_APP: name,
        LABEL_SESSION: session_label(session),
    }
    roles = [substituted(role, name) for role in app.roles]
    keys, data = secret_keys([(labels_of[r.name], r) for r in roles])
    for role in roles:
        for env_name in keys[labels_of[role.name]]:
            check_value(role, env_name, role.env[env_name], REPLICA_SENTINEL)
    out: list[RoleJob] = []
    for index, (role, pod_role) in enumerate(zip(app.roles, roles, strict=True)):
        label = labels_of[role.name]
        labels = {**app_labels, LABEL_ROLE: label}
        annotations = {
            ANN_APP_NAME: app.name,
            ANN_ROLE_NAME: role.name,
            ANN_ROLE_INDEX: str(index),
            # secrets masked: annotations are readable by anyone who may read the Job
            ANN_ROLE: json.dumps(masked(role).to_dict(), sort_keys=True, separators=(",", ":")),
        }
        code = (app.metadata.get(META_KEY) or {}).get("code")
        if code is not None:  # the commit the app was submitted from (no secret in it)
            annotations[ANN_CODE] = json.dumps(code, sort_keys=True, separators=(",", ":"))
        if metrics := metrics_record(role, name, opts):
            annotations[ANN_METRICS] = metrics
        parts = PodParts(
            container=TRAINJOB_NODE if api == "trainjob" else label,
            subdomain=subdomain(api, name, label),
            env={
                **identity,
                settings.ROLE_NAME: role.name,
                settings.NUM_REPLICAS: str(role.num_replicas),
            },
            labels=labels,
            secret_keys=keys[label],
            failures_annotation=_failures_annotation(role, api),
        )
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": job_name(api, name, label),
                "namespace": opts.namespace,
                "labels": labels,
                "annotations": {**opts.annotations, **annotations},
            },
            "spec": {
                **job_policy(_retried_by_job(role, api), opts),
                "template": pod_template(pod_role, name, parts, opts),
            },
        }
        out.append(RoleJob(role, label, job))
    owned: list[Doc] = []
    if bundled and agent_zipapp is not None:
        owned.append(agent_configmap(name, app_labels, agent_zipapp, opts.namespace))
    if data:
        owned.append(secret_doc(name, app_labels, data, opts.namespace))
    return RenderedRoles(out, owned, app_labels)


def _failures_annotation(role: Role, api: str) -> str:
    """A JobSet restarted after a failure is new Jobs (and new per-index counts): there the
    role's failures are the JobSet's restarts, unless the role retries per replica."""
    if api == "job" or role.retry_policy is RetryPolicy.REPLICA:
        return FAILURES_ANNOTATION
    return JOBSET_RESTARTS


def _retried_by_job(role: Role, api: str) -> Role:
    """The role as its Job retries it: in a JobSet the JobSet restarts after a failure (its
    failurePolicy: all replicas start again together), so the Job fails at the first one."""
    if api == "job" or role.retry_policy is RetryPolicy.REPLICA:
        return role
    return role.replace(max_retries=0)


def job_policy(role: Role, opts: RenderOptions) -> dict[str, Any]:
    """Indexed, every replica at once, the role's retries, requeues ignored (podFailurePolicy)."""
    n, retries = role.num_replicas, role.max_retries
    spec: dict[str, Any] = {"completionMode": "Indexed", "completions": n, "parallelism": n}
    if role.retry_policy is RetryPolicy.REPLICA and retries > 0 and not opts.per_index:
        raise UsageError(
            f"role {role.name!r}: retry_policy REPLICA needs backoffLimitPerIndex "
            "(Kubernetes >= 1.29)",
            hint="set --cfg server_version=1.29 (or your cluster's version) if it is newer",
        )
    if role.retry_policy is not RetryPolicy.REPLICA or not opts.per_index:
        # One failure of a gang usually takes every replica down with it, so each retry of
        # the app may cost up to num_replicas failed pods.
        spec["backoffLimit"] = retries * n
    if opts.per_index:
        # Per index, so the controller annotates every pod with its index's counts (the agent
        # turns them into TRAINLAUNCH_RESTART_COUNT and enforces max_requeues): no replica
        # fails more than max_retries times, and one replica out of retries fails the role.
        spec["backoffLimitPerIndex"] = retries
        spec["maxFailedIndexes"] = 0
    # Preemption, eviction and node drains are not the app's fault: do not count them; nor
    # a rank that saved its state on SIGTERM and asked for a requeue (exit 75): both are
    # requeues, and the Job starts a replacement pod (docs/preemption.md).
    rules: list[dict[str, Any]] = [
        {
            "action": "Ignore",
            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
        },
        {
            "action": "Ignore",
            "onExitCodes": {"operator": "In", "values": [settings.REQUEUE_EXIT_CODE]},
            "onPodConditions": [],  # required by the 1.27-1.29 schemas
        },
    ]
    if opts.per_index:  # a pod started after its replica's last requeue ends the Job
        rules.append(
            {
                "action": "FailJob",
                "onExitCodes": {
                    "operator": "In",
                    "values": [settings.REQUEUES_EXHAUSTED_EXIT_CODE],
                },
                "onPodConditions": [],
            }
        )
    spec["podFailurePolicy"] = {"rules": rules}
    if opts.per_index:  # start a replacement only once the old pod is gone: never two pods per rank
        spec["podReplacementPolicy"] = "Failed"
    return spec
