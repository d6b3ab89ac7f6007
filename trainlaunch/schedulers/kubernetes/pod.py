"""The pod template of a role: its container (command, env, resources, ports) and volumes.

One pod template serves every replica, so per-replica values come from the pod itself:
``TRAINLAUNCH_REPLICA_ID`` is read from the completion-index annotation through the downward
API, and ``${replica_id}`` becomes ``$(TRAINLAUNCH_REPLICA_ID)``, which the kubelet expands in
command, args and env values. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from trainlaunch import settings
from trainlaunch.errors import UsageError
from trainlaunch.schedulers.kubernetes.image import container_command, image_volumes
from trainlaunch.schedulers.kubernetes.labels import (
    ANN_ROLE_NAME,
    FAILURES_ANNOTATION,
    INDEX_ANNOTATION,
    REQUEUES_ANNOTATION,
)
from trainlaunch.schedulers.kubernetes.options import RenderOptions
from trainlaunch.schedulers.kubernetes.secret import secret_ref
from trainlaunch.specs import Role, macros
from trainlaunch.values import frozen

REPLICA_ID_REF = f"$({settings.REPLICA_ID})"
# Stands for ${replica_id} between macro substitution and escaping (private-use characters).
REPLICA_SENTINEL = "\ue000replica_id\ue000"
_TOLERATION = re.compile(r"^(?P<key>[^=:]+)(=(?P<value>[^:]*))?(:(?P<effect>[A-Za-z]+))?$")
_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})


def substituted(role: Role, name: str) -> Role:
    """The role with its macros substituted as the pods see them (``${replica_id}`` stays a
    marker until kube_text turns it into ``$(TRAINLAUNCH_REPLICA_ID)``)."""
    values = macros.Values(
        img_root="", app_id=name, replica_id=REPLICA_SENTINEL, rank0_env=settings.RANK0_HOST
    )
    return values.apply(role)


@frozen
class PodParts:
    """What differs between the pod templates of an app's roles, and between targets."""

    container: str  # the container's name
    subdomain: str  # the headless Service the pods resolve under
    env: Mapping[str, str]  # the identity variables (TRAINLAUNCH_APP_ID, ...)
    labels: Mapping[str, str]
    secret_keys: Mapping[str, str] = dataclasses.field(default_factory=dict)  # env -> key
    # the pod annotation TRAINLAUNCH_INDEX_FAILURES comes from: the Job controller's per-index
    # count, or (a JobSet that restarts as a whole) JobSet's restart attempt
    failures_annotation: str = FAILURES_ANNOTATION


def pod_template(role: Role, name: str, parts: PodParts, opts: RenderOptions) -> dict[str, Any]:
    """The pod template of a role already substituted() in app ``name``."""
    container: dict[str, Any] = {"name": parts.container, "image": role.image}
    if opts.image_pull_policy:
        container["imagePullPolicy"] = opts.image_pull_policy
    command, args = container_command(role, opts)
    container["command"] = [kube_text(c) for c in command]
    container["args"] = [kube_text(a) for a in args]
    container["env"] = _env(role, parts, opts, name)
    if resources := _resources(role):
        container["resources"] = resources
    if ports := role_ports(role, opts):
        container["ports"] = [
            {"name": k, "containerPort": v, "protocol": "TCP"} for k, v in ports.items()
        ]
    container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    shm: dict[str, Any] = {"medium": "Memory"}
    if opts.shm_size:
        shm["sizeLimit"] = opts.shm_size
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": shm}]
    for mount, volume in image_volumes(role, name, opts):
        container["volumeMounts"].append(mount)
        volumes.append(volume)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "subdomain": parts.subdomain,
        "enableServiceLinks": False,  # thousands of *_SERVICE_HOST variables help no one
        "containers": [container],
        "volumes": volumes,
    }
    if opts.grace_period is not None:  # time to save on SIGTERM (preemption, eviction)
        spec["terminationGracePeriodSeconds"] = opts.grace_period
    if opts.service_account:
        spec["serviceAccountName"] = opts.service_account
    if opts.priority_class:
        spec["priorityClassName"] = opts.priority_class
    if opts.node_selector:
        spec["nodeSelector"] = dict(opts.node_selector)
    if opts.tolerations:
        spec["tolerations"] = [parse_toleration(t) for t in opts.tolerations]
    if opts.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in opts.image_pull_secrets]
    # Sidecars (e.g. istio) never exit and would keep a finished replica's pod running.
    annotations = {**opts.annotations, "sidecar.istio.io/inject": "false", ANN_ROLE_NAME: role.name}
    return {"metadata": {"labels": dict(parts.labels), "annotations": annotations}, "spec": spec}


def kube_text(text: str) -> str:
    """Escape text for command/args/env values, where the kubelet expands ``$(VAR)``."""
    escaped = re.sub(r"\$(?=[$(])", "$$", text)  # the kubelet turns '$$' back into '$'
    return escaped.replace(REPLICA_SENTINEL, REPLICA_ID_REF)


def _env(role: Role, parts: PodParts, opts: RenderOptions, name: str) -> list[dict[str, Any]]:
    # TRAINLAUNCH_REPLICA_ID comes first: $(VAR) only expands variables defined earlier.
    env: list[dict[str, Any]] = [annotation_env(settings.REPLICA_ID, INDEX_ANNOTATION)]
    counts: dict[str, str] = {}
    if opts.per_index:  # the pod's attempt and the requeue limit (agent/requeues.py)
        env += [
            annotation_env(settings.INDEX_FAILURES, parts.failures_annotation),
            annotation_env(settings.INDEX_REQUEUES, REQUEUES_ANNOTATION),
        ]
        counts[settings.MAX_REQUEUES] = str(opts.max_requeues)
    ours = {**parts.env, **counts}
    env += [{"name": k, "value": v} for k, v in ours.items()]
    for k, v in role.env.items():  # in their order: a value may refer to an earlier $(VAR)
        if k in ours or k in _FROM_POD:
            continue
        if k in parts.secret_keys:  # the value stays in the Secret
            env.append({"name": k, "valueFrom": secret_ref(name, parts.secret_keys[k])})
        else:
            env.append({"name": k, "value": kube_text(v)})
    return env


_FROM_POD = frozenset({settings.REPLICA_ID, settings.INDEX_FAILURES, settings.INDEX_REQUEUES})


def annotation_env(name: str, annotation: str) -> dict[str, Any]:
    """A variable the kubelet fills in from one of the pod's annotations ('' when absent)."""
    return {
        "name": name,
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{annotation}']"}},
    }


def _resources(role: Role) -> dict[str, Any]:
    r = role.resource
    quantities: dict[str, str] = {}
    if r.cpu:
        quantities["cpu"] = str(r.cpu)
    if r.memMB:
        quantities["memory"] = f"{r.memMB}Mi"
    if r.gpu:
        quantities["nvidia.com/gpu"] = str(r.gpu)
    # requests == limits: the Guaranteed QoS class, so a training pod is evicted last.
    return {"requests": quantities, "limits": dict(quantities)} if quantities else {}


def role_ports(role: Role, opts: RenderOptions) -> dict[str, int]:
    ports = {str(k): int(v) for k, v in role.port_map.items()}
    if opts.rdzv_port not in ports.values():
        ports = {"rdzv": opts.rdzv_port, **ports}
    return ports


def parse_toleration(text: str) -> dict[str, str]:
    """kubectl taint syntax: ``key=value:Effect``, ``key:Effect``, ``key=value`` or ``key``."""
    m = _TOLERATION.match(text.strip())
    if not m or (m["effect"] and m["effect"] not in _EFFECTS):
        raise UsageError(f"bad toleration {text!r}: use key[=value][:{'|'.join(sorted(_EFFECTS))}]")
    out = {"key": m["key"], "operator": "Equal" if m["value"] is not None else "Exists"}
    if m["value"] is not None:
        out["value"] = m["value"]
    if m["effect"]:
        out["effect"] = m["effect"]
    return out
