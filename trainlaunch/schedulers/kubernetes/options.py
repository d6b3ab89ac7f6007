"""The runopts that shape the manifests, checked once (``RenderOptions.from_cfg``)."""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Mapping

from trainlaunch import settings
from trainlaunch.errors import UsageError
from trainlaunch.preflight import options as preflight_options
from trainlaunch.schedulers.kubernetes.image import (
    AGENT_DIR,
    AGENT_MODES,
    DEFAULT_METRICS_MOUNT,
    POD_METRICS_DIR,
)
from trainlaunch.schedulers.kubernetes.labels import RESERVED_PREFIX
from trainlaunch.schedulers.kubernetes.syntax import is_dns_subdomain, is_label_value
from trainlaunch.specs import CfgVal, macros, runopts
from trainlaunch.values import frozen

OLDEST_VERSION = (1, 27)  # the oldest server trainlaunch can render for (schema-tested)
NEWEST_VERSION = (1, 37)  # the newest server schema-tested
PER_INDEX_VERSION = (1, 29)  # backoffLimitPerIndex, podReplacementPolicy on by default (beta)
# The default server_version: per-index counts (requeues, TRAINLAUNCH_RESTART_COUNT) need 1.29;
# an older server drops the newer fields and the pods say what they cannot count.
DEFAULT_VERSION = PER_INDEX_VERSION
DEFAULT_MAX_REQUEUES = 3  # as on the local and Slurm backends
DEFAULT_RDZV_PORT = 29500  # every pod has its own network namespace, so a fixed port is safe
_PULL_POLICIES = frozenset({"Always", "IfNotPresent", "Never"})
# What the app is created as: core Indexed Jobs (no operator), a JobSet (the JobSet controller),
# or a Kubeflow Trainer TrainJob (Trainer v2, which makes a JobSet from a ClusterTrainingRuntime).
APIS = ("job", "jobset", "trainjob")
DEFAULT_RUNTIME = "torch-distributed"  # the ClusterTrainingRuntime Kubeflow Trainer ships


@frozen
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
    api: str = "job"  # one of APIS
    queue: str | None = None  # Kueue LocalQueue: the kueue.x-k8s.io/queue-name label, suspended
    runtime: str = DEFAULT_RUNTIME  # api=trainjob: the ClusterTrainingRuntime it references

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
        if grace is not None and (not isinstance(grace, int) or not 0 <= grace < 2**63):
            # the API server's field is an int64: a larger value is refused at submission
            raise UsageError(
                f"termination_grace_period must be 0..{2**63 - 1} seconds, got {grace!r}"
            )
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
        api = opt_str(cfg, "api") or "job"
        if api not in APIS:
            raise UsageError(f"api must be one of {', '.join(APIS)}, got {api!r}")
        queue = opt_str(cfg, "queue")
        if queue is not None and not (is_dns_subdomain(queue) and is_label_value(queue)):
            raise UsageError(f"queue must be a Kueue LocalQueue name (a DNS label), got {queue!r}")
        runtime = opt_str(cfg, "runtime") or DEFAULT_RUNTIME
        if not is_dns_subdomain(runtime):
            raise UsageError(f"runtime must be a ClusterTrainingRuntime name, got {runtime!r}")
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
            api=api,
            queue=queue,
            runtime=runtime,
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


def scheduler_opts() -> runopts:
    """The backend's options, with their help (``trainlaunch runopts kubernetes``)."""
    o = runopts()
    o.add("namespace", str, "namespace of the app (default: the kube context's, else 'default')")
    o.add("context", str, "kubeconfig context (default: the current context)")
    o.add(
        "kubeconfig",
        str,
        "kubeconfig file (default: $KUBECONFIG or ~/.kube/config; "
        "inside a pod: its service account)",
    )
    o.add(
        "server_version",
        str,
        "oldest Kubernetes version to render for (1.27+); from 1.29 the Jobs count per "
        "replica: requeue limit, TRAINLAUNCH_RESTART_COUNT, podReplacementPolicy",
        default=f"{DEFAULT_VERSION[0]}.{DEFAULT_VERSION[1]}",
    )
    o.add(
        "api",
        str,
        "what the app is created as: 'job' (an Indexed Job + headless Service per role; no "
        "operator), 'jobset' (one JobSet, a replicated Job per role; needs the JobSet "
        "controller) or 'trainjob' (one Kubeflow Trainer TrainJob of one role, on the "
        "ClusterTrainingRuntime 'runtime'; needs Kubeflow Trainer v2.2+)",
        default="job",
    )
    o.add(
        "queue",
        str,
        "Kueue LocalQueue of the namespace: labels the app kueue.x-k8s.io/queue-name and "
        "submits it suspended until Kueue admits it (status says where it waits)",
    )
    o.add(
        "runtime",
        str,
        "api=trainjob: the ClusterTrainingRuntime the TrainJob references",
        default=DEFAULT_RUNTIME,
    )
    o.add("service_account", str, "service account the pods run as")
    o.add("priority_class", str, "priorityClassName of the pods")
    o.add(
        "node_selector",
        dict,
        "node labels the pods need, e.g. node.kubernetes.io/instance-type:p4d.24xlarge",
    )
    o.add("tolerations", list, "taints the pods tolerate: key[=value][:Effect]")
    o.add("labels", dict, "extra labels on Jobs, Services and pods")
    o.add("annotations", dict, "extra annotations on Jobs and pods")
    o.add("image_pull_secrets", list, "secrets to pull the image with")
    o.add("image_pull_policy", str, "Always, IfNotPresent or Never (default: the cluster's)")
    o.add("shm_size", str, "size limit of the memory-backed /dev/shm, e.g. 16Gi")
    o.add(
        "termination_grace_period",
        int,
        "seconds between SIGTERM (preemption, eviction, stop) and SIGKILL: time for the "
        "ranks to save (terminationGracePeriodSeconds; default: the cluster's, 30)",
    )
    o.add(
        "max_requeues",
        int,
        "how often each replica runs again after a preemption, eviction or a rank's exit 75, "
        "apart from max_retries; then the Job fails (needs server_version 1.29+)",
        default=DEFAULT_MAX_REQUEUES,
    )
    o.add(
        "rdzv_port",
        int,
        f"port rank 0 listens on ({settings.RDZV_PORT})",
        default=DEFAULT_RDZV_PORT,
    )
    o.add(
        "agent",
        str,
        "where pods running dist.ddp get trainlaunch's node agent: 'bundled' (a zipapp "
        "in a ConfigMap of the app: any image with Python and torch) or 'image' (the "
        "image has trainlaunch installed)",
        default="bundled",
    )
    o.add(
        "python",
        str,
        "the image's interpreter for roles that run 'python' (default: python3, else python)",
    )
    o.add(
        "metrics_pvc",
        str,
        "PersistentVolumeClaim for the ranks' metrics (ReadWriteMany for several pods); "
        "without one they stay inside the pods",
    )
    o.add(
        "metrics_mount",
        str,
        "where the metrics PVC is mounted in the pods; metrics go to MOUNT/<app name>/",
        default=DEFAULT_METRICS_MOUNT,
    )
    o.add(
        "metrics_local_dir",
        str,
        "the metrics PVC's storage as mounted on this machine (e.g. an NFS share), "
        "so `trainlaunch metrics` can read it",
    )
    preflight_options.add_runopts(o)  # docs/preflight.md
    return o
