"""Pure rendering of an AppDef into Kubernetes manifests, for each target (``api``):

* ``job`` (the default, no operator): per role an Indexed Job + a headless Service;
* ``jobset``: one JobSet (jobset.py), one replicated Job per role; JobSet makes the Service;
* ``trainjob``: one Kubeflow Trainer TrainJob (trainjob.py) referencing a ClusterTrainingRuntime.

Every replica is one pod of an Indexed Job (``completions = parallelism = num_replicas``); the
Job controller gives pod ``k`` the hostname ``<job>-<k>`` and, with ``subdomain`` set to the
headless Service's name, the DNS name ``<job>-<k>.<svc>.<ns>.svc``. One pod template serves all
replicas, so per-replica values come from the pod itself: ``TRAINLAUNCH_REPLICA_ID`` is read
from the completion-index annotation through the downward API, and the ``${replica_id}`` macro
becomes ``$(TRAINLAUNCH_REPLICA_ID)``, which the kubelet expands in command, args and env values.
A role running the node agent gets it from the app's ConfigMap (image.py), so stock images work.
Nothing here does I/O or imports the ``kubernetes`` package.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from trainlaunch.errors import UsageError
from trainlaunch.schedulers.kubernetes import jobset, trainjob
from trainlaunch.schedulers.kubernetes.kueue import queued
from trainlaunch.schedulers.kubernetes.labels import ANN_ROLE, LABEL_APP, LABEL_ROLE
from trainlaunch.schedulers.kubernetes.options import RenderOptions
from trainlaunch.schedulers.kubernetes.pod import role_ports
from trainlaunch.schedulers.kubernetes.roles import render_roles
from trainlaunch.specs import AppDef, Role


def render_app(
    app: AppDef,
    name: str,
    session: str,
    opts: RenderOptions,
    agent_zipapp: bytes | None = None,
) -> list[dict[str, Any]]:
    """The app's objects for opts.api, in the order they are created: the first one (a Job, the
    JobSet or the TrainJob) owns the agent's ConfigMap and the Secret, which follow it."""
    rendered = render_roles(app, name, session, opts, agent_zipapp)
    if opts.api == "jobset":
        return [queued(jobset.render(app, name, rendered, opts), opts), *rendered.owned]
    if opts.api == "trainjob":
        return [queued(trainjob.render(app, name, rendered, opts), opts), *rendered.owned]
    docs: list[dict[str, Any]] = []
    for index, rj in enumerate(rendered.jobs):  # per role: its Job, then its Service
        docs.append(queued(rj.job, opts))
        if index == 0:
            docs += rendered.owned
        docs.append(
            _service(rj.job["metadata"]["name"], rj.job["metadata"]["labels"], rj.role, opts)
        )
    return docs


def _service(job: str, labels: dict[str, str], role: Role, opts: RenderOptions) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": job, "namespace": opts.namespace, "labels": dict(labels)},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,  # DNS records exist before any readiness
            "selector": {LABEL_APP: labels[LABEL_APP], LABEL_ROLE: labels[LABEL_ROLE]},
            "ports": [
                {"name": k, "port": v, "targetPort": v, "protocol": "TCP"}
                for k, v in role_ports(role, opts).items()
            ],
        },
    }


def role_from_job(job: Mapping[str, Any]) -> Role | None:
    """The Role recorded on a Job by render_app (None when absent or unreadable)."""
    raw = (job.get("metadata", {}).get("annotations") or {}).get(ANN_ROLE)
    try:
        return Role.from_dict(json.loads(raw)) if raw else None
    except (ValueError, KeyError, TypeError, UsageError):
        return None
