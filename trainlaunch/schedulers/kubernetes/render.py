"""Pure rendering of an AppDef into Kubernetes manifests: per role an Indexed Job + headless Service.

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

import dataclasses
import json
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from trainlaunch import settings
from trainlaunch.errors import UsageError
from trainlaunch.handles import make_app_handle
from trainlaunch.schedulers.kubernetes.checks import is_label_value
from trainlaunch.schedulers.kubernetes.image import (
    AGENT_DIR,
    AGENT_MODES,
    DEFAULT_METRICS_MOUNT,
    POD_METRICS_DIR,
    agent_configmap,
    container_command,
    image_volumes,
    runs_agent,
)
from trainlaunch.schedulers.kubernetes.metrics import ANN_METRICS, metrics_record
from trainlaunch.specs import AppDef, CfgVal, RetryPolicy, Role, macros

BACKEND = "kubernetes"
OLDEST_VERSION = (1, 27)  # the oldest server trainlaunch can render for (schema-tested)
NEWEST_VERSION = (1, 37)  # the newest server schema-tested
PER_INDEX_VERSION = (1, 29)  # backoffLimitPerIndex, podReplacementPolicy on by default (beta)
# The default server_version: per-index counts (requeues, TRAINLAUNCH_RESTART_COUNT) need 1.29;
# an older server drops the newer fields and the pods say what they cannot count.
DEFAULT_VERSION = PER_INDEX_VERSION
DEFAULT_MAX_REQUEUES = 3  # as on the local and Slurm backends
DEFAULT_RDZV_PORT = 29500  # every pod has its own network namespace, so a fixed port is safe

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_APP = "trainlaunch.io/app"
LABEL_ROLE = "trainlaunch.io/role"
LABEL_SESSION = "trainlaunch.io/session"
ANN_APP_NAME = "trainlaunch.io/app-name"
ANN_ROLE_INDEX = "trainlaunch.io/role-index"
ANN_ROLE = "trainlaunch.io/role"  # the Role as submitted (JSON), so describe can return it
ANN_ROLE_NAME = "trainlaunch.io/role-name"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# Set on each pod by the Job controller when the Job has backoffLimitPerIndex (1.29+): the
# index's failures before this pod, counted against the limit, and those the podFailurePolicy
# ignored (requeues: exit 75, preemption, eviction); absent means 0.
FAILURES_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
REQUEUES_ANNOTATION = "batch.kubernetes.io/job-index-ignored-failure-count"
RESERVED_PREFIX = "trainlaunch.io/"

MAX_APP_BASE = 22  # leaves room for '-' + suffix + '-' + role + '-' + index within 63
REPLICA_ID_REF = f"$({settings.REPLICA_ID})"
# Stands for ${replica_id} between macro substitution and escaping (private-use characters).
_REPLICA_SENTINEL = "\ue000replica_id\ue000"
_TOLERATION = re.compile(r"^(?P<key>[^=:]+)(=(?P<value>[^:]*))?(:(?P<effect>[A-Za-z]+))?$")
_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})
_PULL_POLICIES = frozenset({"Always", "IfNotPresent", "Never"})


@dataclasses.dataclass(frozen=True)
class RenderOptions:
    """The runopts that shape the manifests (see ``kubernetes.run_opts`` for their help)."""

    namespace: str = "default"
    server_version: tuple[int, int] = DEFAULT_VERSION
    service_account: str | None = None
    priority_class: str | None = None
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tolerations: tuple[str, ...] = ()
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    image_pull_secrets: tuple[str, ...] = ()
    image_pull_policy: str | None = None
    shm_size: str | None = None
    rdzv_port: int = DEFAULT_RDZV_PORT
    agent: str = "bundled"
    python: str | None = None
    metrics_pvc: str | None = None
    metrics_mount: str = DEFAULT_METRICS_MOUNT
    metrics_local_dir: str | None = None
    grace_period: int | None = None  # terminationGracePeriodSeconds: SIGTERM -> SIGKILL
    max_requeues: int = DEFAULT_MAX_REQUEUES  # per replica; enforced by the pod's agent

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, CfgVal], namespace: str) -> RenderOptions:
        """Build from a resolved cfg; the namespace is resolved by the caller."""
        policy = cfg.get("image_pull_policy")
        if policy is not None and policy not in _PULL_POLICIES:
            raise UsageError(
                f"image_pull_policy must be one of {', '.join(sorted(_PULL_POLICIES))}, "
                f"got {policy!r}"
            )
        port = cfg.get("rdzv_port") or DEFAULT_RDZV_PORT
        if not isinstance(port, int) or not 1 <= port <= 65535:
            raise UsageError(f"rdzv_port must be in 1..65535, got {port!r}")
        grace = cfg.get("termination_grace_period")
        if grace is not None and (not isinstance(grace, int) or grace < 0):
            raise UsageError(f"termination_grace_period must be >= 0 seconds, got {grace!r}")
        requeues = cfg.get("max_requeues")
        requeues = DEFAULT_MAX_REQUEUES if requeues is None else requeues
        if not isinstance(requeues, int) or isinstance(requeues, bool) or requeues < 0:
            raise UsageError(f"max_requeues must be >= 0, got {requeues!r}")
        for key in [*_str_map(cfg.get("labels")), *_str_map(cfg.get("annotations"))]:
            if key.startswith(RESERVED_PREFIX):
                raise UsageError(f"label/annotation {key!r} is reserved for trainlaunch")
        agent = opt_str(cfg, "agent") or "bundled"
        if agent not in AGENT_MODES:
            raise UsageError(f"agent must be one of {', '.join(AGENT_MODES)}, got {agent!r}")
        mount = opt_str(cfg, "metrics_mount") or DEFAULT_METRICS_MOUNT
        if not posixpath.isabs(mount) or mount.rstrip("/") in ("", AGENT_DIR, "/dev/shm"):
            raise UsageError(f"metrics_mount must be an absolute path of its own, got {mount!r}")
        return cls(
            namespace=namespace,
            server_version=parse_version(opt_str(cfg, "server_version") or ""),
            service_account=opt_str(cfg, "service_account"),
            priority_class=opt_str(cfg, "priority_class"),
            node_selector=_str_map(cfg.get("node_selector")),
            tolerations=tuple(_str_list(cfg.get("tolerations"))),
            labels=_str_map(cfg.get("labels")),
            annotations=_str_map(cfg.get("annotations")),
            image_pull_secrets=tuple(_str_list(cfg.get("image_pull_secrets"))),
            image_pull_policy=opt_str(cfg, "image_pull_policy"),
            shm_size=opt_str(cfg, "shm_size"),
            rdzv_port=port,
            agent=agent,
            python=opt_str(cfg, "python"),
            metrics_pvc=opt_str(cfg, "metrics_pvc"),
            metrics_mount=posixpath.normpath(mount),
            metrics_local_dir=opt_str(cfg, "metrics_local_dir"),
            grace_period=grace,
            max_requeues=requeues,
        )

    @property
    def per_index(self) -> bool:
        """Whether the Jobs count per index (backoffLimitPerIndex): requeues and attempts."""
        return self.server_version >= PER_INDEX_VERSION

    def metrics_path(self) -> str:
        """The default TRAINLAUNCH_METRICS_PATH in the pods (``${app_id}``: the app's name)."""
        if self.metrics_pvc:
            return f"{self.metrics_mount}/{macros.app_id}/"
        return f"{POD_METRICS_DIR}/"


def opt_str(cfg: Mapping[str, CfgVal], key: str) -> str | None:
    """A string option, None when unset or empty."""
    value = cfg.get(key)
    return str(value) if value not in (None, "") else None


def _str_map(value: CfgVal) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _str_list(value: CfgVal) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def parse_version(text: str) -> tuple[int, int]:
    """``"1.29"`` or ``"v1.29.3"`` -> (1, 29); empty -> the default version."""
    if not text:
        return DEFAULT_VERSION
    m = re.match(r"^v?(\d+)\.(\d+)(\.\d+)?$", text.strip())
    if not m:
        raise UsageError(f"server_version must look like 1.29, got {text!r}")
    version = (int(m[1]), int(m[2]))
    if version < OLDEST_VERSION:
        raise UsageError(
            f"server_version {text} is older than the oldest supported Kubernetes "
            f"{OLDEST_VERSION[0]}.{OLDEST_VERSION[1]}"
        )
    return version


# --- names --------------------------------------------------------------------------------------


def dns_label(text: str, max_len: int = 63) -> str:
    """Lower-case text squeezed into an RFC 1123 label of at most max_len characters."""
    label = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return label[:max_len].rstrip("-")


def app_name(name: str, suffix: str) -> str:
    """The unique app name: the AppDef's name as a DNS-1035 label plus a random suffix."""
    base = dns_label(name, MAX_APP_BASE) or "app"
    if not base[0].isalpha():  # Service names (DNS-1035) must start with a letter
        base = ("tl-" + base)[:MAX_APP_BASE].rstrip("-")
    return f"{base}-{suffix}"


def job_names(app: AppDef, name: str) -> dict[str, str]:
    """Role name -> Job (and Service) name, each short enough for ``<job>-<last index>``."""
    out: dict[str, str] = {}
    for role in app.roles:
        budget = 63 - len(name) - 1 - 1 - len(str(role.num_replicas - 1))
        job = f"{name}-{dns_label(role.name, budget) or 'r'}"
        if job in out.values():
            raise UsageError(
                f"roles of app {app.name!r} collide as Kubernetes name {job!r}; "
                "rename one so they differ in letters or digits"
            )
        out[role.name] = job
    return out


def session_label(session: str) -> str:
    """The session as a label value (list rebuilds handles from it)."""
    return session if session and is_label_value(session) else dns_label(session) or "default"


def role_label(job: str, name: str) -> str:
    """The role part of a Job name (used as label value and container name)."""
    return job[len(name) + 1 :]


# --- manifests ----------------------------------------------------------------------------------


def render_app(
    app: AppDef,
    name: str,
    session: str,
    opts: RenderOptions,
    agent_zipapp: bytes | None = None,
) -> list[dict[str, Any]]:
    """Per role, in order: its Job then its headless Service; the agent's ConfigMap follows
    the first Job (which owns it) when a role runs the bundled agent."""
    jobs = job_names(app, name)
    first = jobs[app.roles[0].name]
    rank0 = f"{first}-0.{first}.{opts.namespace}.svc"
    app_id = f"{opts.namespace}:{name}"
    identity = {
        settings.APP_ID: app_id,
        settings.HANDLE: make_app_handle(BACKEND, session, app_id),
        settings.RANK0_HOST: rank0,
        settings.RDZV_PORT: str(opts.rdzv_port),
    }
    bundled = opts.agent == "bundled" and any(runs_agent(r) for r in app.roles)
    if bundled and agent_zipapp is None:
        raise ValueError("render_app: the bundled agent needs agent_zipapp")
    app_labels = {
        **opts.labels,
        LABEL_MANAGED_BY: "trainlaunch",
        LABEL_APP: name,
        LABEL_SESSION: session_label(session),
    }
    docs: list[dict[str, Any]] = []
    for index, role in enumerate(app.roles):
        job = jobs[role.name]
        labels = {
            **opts.labels,
            LABEL_MANAGED_BY: "trainlaunch",
            LABEL_APP: name,
            LABEL_ROLE: role_label(job, name),
            LABEL_SESSION: session_label(session),
        }
        annotations = {
            ANN_APP_NAME: app.name,
            ANN_ROLE_NAME: role.name,
            ANN_ROLE_INDEX: str(index),
            ANN_ROLE: json.dumps(role.to_dict(), sort_keys=True, separators=(",", ":")),
        }
        if metrics := metrics_record(role, name, opts):
            annotations[ANN_METRICS] = metrics
        env = {
            **identity,
            settings.ROLE_NAME: role.name,
            settings.NUM_REPLICAS: str(role.num_replicas),
        }
        pod = _pod_template(role, job, name, env, labels, opts)
        docs.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": job,
                    "namespace": opts.namespace,
                    "labels": labels,
                    "annotations": {**opts.annotations, **annotations},
                },
                "spec": {**_job_policy(role, opts), "template": pod},
            }
        )
        if index == 0 and bundled and agent_zipapp is not None:
            docs.append(agent_configmap(name, app_labels, agent_zipapp, opts.namespace))
        docs.append(_service(job, labels, role, opts))
    return docs


def _job_policy(role: Role, opts: RenderOptions) -> dict[str, Any]:
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


def _pod_template(
    role: Role,
    job: str,
    name: str,
    env: dict[str, str],
    labels: dict[str, str],
    opts: RenderOptions,
) -> dict[str, Any]:
    values = macros.Values(
        img_root="", app_id=name, replica_id=_REPLICA_SENTINEL, rank0_env=settings.RANK0_HOST
    )
    role = values.apply(role)
    container: dict[str, Any] = {"name": role_label(job, name), "image": role.image}
    if opts.image_pull_policy:
        container["imagePullPolicy"] = opts.image_pull_policy
    command, args = container_command(role, opts)
    container["command"] = [kube_text(c) for c in command]
    container["args"] = [kube_text(a) for a in args]
    container["env"] = _env(role, env, opts)
    if resources := _resources(role):
        container["resources"] = resources
    if ports := _ports(role, opts):
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
        "subdomain": job,
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
    return {"metadata": {"labels": dict(labels), "annotations": annotations}, "spec": spec}


def kube_text(text: str) -> str:
    """Escape text for command/args/env values, where the kubelet expands ``$(VAR)``."""
    escaped = re.sub(r"\$(?=[$(])", "$$", text)  # the kubelet turns '$$' back into '$'
    return escaped.replace(_REPLICA_SENTINEL, REPLICA_ID_REF)


def _env(role: Role, identity: dict[str, str], opts: RenderOptions) -> list[dict[str, Any]]:
    # TRAINLAUNCH_REPLICA_ID comes first: $(VAR) only expands variables defined earlier.
    env: list[dict[str, Any]] = [_annotation_env(settings.REPLICA_ID, INDEX_ANNOTATION)]
    counts: dict[str, str] = {}
    if opts.per_index:  # the pod's attempt and the requeue limit (agent/requeues.py)
        env += [
            _annotation_env(settings.INDEX_FAILURES, FAILURES_ANNOTATION),
            _annotation_env(settings.INDEX_REQUEUES, REQUEUES_ANNOTATION),
        ]
        counts[settings.MAX_REQUEUES] = str(opts.max_requeues)
    ours = {**identity, **counts}
    env += [{"name": k, "value": v} for k, v in ours.items()]
    env += [
        {"name": k, "value": kube_text(v)}
        for k, v in role.env.items()
        if k not in ours and k not in _FROM_POD
    ]
    return env


_FROM_POD = frozenset({settings.REPLICA_ID, settings.INDEX_FAILURES, settings.INDEX_REQUEUES})


def _annotation_env(name: str, annotation: str) -> dict[str, Any]:
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


def _ports(role: Role, opts: RenderOptions) -> dict[str, int]:
    ports = {str(k): int(v) for k, v in role.port_map.items()}
    if opts.rdzv_port not in ports.values():
        ports = {"rdzv": opts.rdzv_port, **ports}
    return ports


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
                for k, v in _ports(role, opts).items()
            ],
        },
    }


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


def role_from_job(job: Mapping[str, Any]) -> Role | None:
    """The Role recorded on a Job by render_app (None when absent or unreadable)."""
    raw = (job.get("metadata", {}).get("annotations") or {}).get(ANN_ROLE)
    try:
        return Role.from_dict(json.loads(raw)) if raw else None
    except (ValueError, KeyError, TypeError, UsageError):
        return None


def to_yaml(docs: list[dict[str, Any]]) -> str:
    """The manifests as one multi-document YAML text (JSON documents without PyYAML)."""
    try:
        import yaml
    except ImportError:
        return "\n---\n".join(json.dumps(d, indent=2) for d in docs) + "\n"
    # No line folding: every arg and annotation stays on one line, as written.
    return str(yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False, width=1 << 30))
