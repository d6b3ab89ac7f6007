"""``api=trainjob``: the app as one Kubeflow Trainer ``TrainJob`` (``trainer.kubeflow.org/v1alpha1``).

The TrainJob references a ClusterTrainingRuntime (``--cfg runtime=NAME``, default Trainer's
``torch-distributed``); Trainer (v2.2+: ``runtimePatches``) makes a JobSet from the runtime's
template, whose replicated Job ``node`` runs the trainer: replica k is the pod
``<name>-node-0-<k>``, at ``<name>-node-0-<k>.<name>.<namespace>.svc``. The trainer carries the
role's image, command, args, env (the same env contract: TRAINLAUNCH_* and the
completion-index downward API) and resources, ``numNodes`` its replicas; a runtime patch
(``manager: trainlaunch.io/trainlaunch``) adds the pods' labels, annotations, volumes (the
agent's ConfigMap, /dev/shm, the metrics PVC) and scheduling options. What the runtime owns
cannot be set per TrainJob and is refused with a one-line reason: several roles,
``max_retries``, ``priority_class``, ``image_pull_policy``. The retries, requeue counting and
restart policy are the runtime's: ``runtime_manifest`` is a ClusterTrainingRuntime with the
Job target's (docs/kubernetes.md). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainlaunch.errors import UsageError
from trainlaunch.schedulers.kubernetes.jobset import policies
from trainlaunch.schedulers.kubernetes.names import TRAINJOB_NODE
from trainlaunch.schedulers.kubernetes.options import RenderOptions
from trainlaunch.schedulers.kubernetes.roles import RenderedRoles, job_policy
from trainlaunch.specs import AppDef, Role

GROUP = "trainer.kubeflow.org"
API_VERSION = f"{GROUP}/v1alpha1"
PLURAL = "trainjobs"
MANAGER = "trainlaunch.io/trainlaunch"  # who owns trainlaunch's runtime patch
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"  # 'trainer': the trainer's Job
RESERVED_ENV = frozenset(  # Trainer's torch plugin sets these and refuses them in trainer.env
    {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
)
# pod spec fields a runtime patch may set (Trainer's PodSpecPatch), from the pod template
_PATCHABLE = (
    "serviceAccountName",
    "nodeSelector",
    "tolerations",
    "imagePullSecrets",
    "terminationGracePeriodSeconds",
)


def render(app: AppDef, name: str, rendered: RenderedRoles, opts: RenderOptions) -> dict[str, Any]:
    """The TrainJob of a one-role app (UsageError for what a TrainJob cannot carry)."""
    _check(app, opts)
    (rj,) = rendered.jobs
    pod = rj.job["spec"]["template"]
    pod_spec, container = pod["spec"], pod["spec"]["containers"][0]
    trainer: dict[str, Any] = {
        "image": container["image"],
        "command": container["command"],
        "args": container["args"],
        "env": container["env"],
        "numNodes": rj.role.num_replicas,
    }
    if container.get("resources"):
        trainer["resourcesPerNode"] = container["resources"]
    patch_spec: dict[str, Any] = {
        "volumes": pod_spec["volumes"],
        "containers": [{"name": TRAINJOB_NODE, "volumeMounts": container["volumeMounts"]}],
    }
    patch_spec.update({k: pod_spec[k] for k in _PATCHABLE if k in pod_spec})
    node = {
        "name": TRAINJOB_NODE,
        "template": {"spec": {"template": {"metadata": pod["metadata"], "spec": patch_spec}}},
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": {
            **rj.job["metadata"],
            "name": name,
            "labels": dict(rendered.labels),
        },
        "spec": {
            "runtimeRef": {
                "name": opts.runtime,
                "apiGroup": GROUP,
                "kind": "ClusterTrainingRuntime",
            },
            "trainer": trainer,
            "runtimePatches": [
                {
                    "manager": MANAGER,
                    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}},
                }
            ],
        },
    }


def _check(app: AppDef, opts: RenderOptions) -> None:
    why = ""
    role = app.roles[0]
    if len(app.roles) != 1:
        why = f"a TrainJob has one trainer, and app {app.name!r} has {len(app.roles)} roles"
    elif role.max_retries:
        why = (
            f"role {role.name!r} asks for max_retries={role.max_retries}, but a TrainJob's "
            "retries are its ClusterTrainingRuntime's (its JobSet failurePolicy)"
        )
    elif opts.priority_class or opts.image_pull_policy:
        key = "priority_class" if opts.priority_class else "image_pull_policy"
        why = f"--cfg {key} is the ClusterTrainingRuntime's to set: a TrainJob cannot patch it"
    elif reserved := sorted(RESERVED_ENV & set(role.env)):
        why = f"Kubeflow Trainer sets {', '.join(reserved)} itself and refuses them in a TrainJob"
    if why:
        raise UsageError(
            f"cannot run {app.name!r} as a TrainJob: {why}",
            hint="use --cfg api=jobset (the same pods, no runtime needed) or api=job",
        )


def role_views(tj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The TrainJob's one role as a Job status.py reads: the trainer's pods and its verdict."""
    meta = tj.get("metadata") or {}
    spec = tj.get("spec") or {}
    trainer = spec.get("trainer") or {}
    pod: Mapping[str, Any] = {}
    for patch in spec.get("runtimePatches") or []:
        if patch.get("manager") == MANAGER:
            jobs = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get(
                "spec"
            ) or {}
            for rj in jobs.get("replicatedJobs") or []:
                if rj.get("name") == TRAINJOB_NODE:
                    pod = ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
    pod_spec = pod.get("spec") or {}
    first: Mapping[str, Any] = next(iter(pod_spec.get("containers") or []), {})
    mounts = first.get("volumeMounts") or []
    container = {
        "name": TRAINJOB_NODE,
        "image": trainer.get("image"),
        "command": trainer.get("command") or [],
        "args": trainer.get("args") or [],
        "env": trainer.get("env") or [],
        "volumeMounts": mounts,
    }
    n = int(trainer.get("numNodes") or 1)
    return [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                **{k: v for k, v in meta.items() if k != "labels"},
                "name": f"{meta.get('name')}-{TRAINJOB_NODE}-0",
                "labels": dict((pod.get("metadata") or {}).get("labels") or {}),
            },
            "spec": {
                "completionMode": "Indexed",
                "completions": n,
                "parallelism": n,
                "suspend": bool(spec.get("suspend")),
                "template": {
                    "metadata": dict(pod.get("metadata") or {}),
                    "spec": {**pod_spec, "subdomain": meta.get("name"), "containers": [container]},
                },
            },
            "status": {"conditions": list((tj.get("status") or {}).get("conditions") or [])},
        }
    ]


def runtime_manifest(
    name: str = "trainlaunch", max_restarts: int = 3, opts: RenderOptions | None = None
) -> dict[str, Any]:
    """A ClusterTrainingRuntime whose TrainJobs fail, retry and requeue as api=jobset apps do:
    the trainer's Job stops at its first counted failure and the JobSet restarts as a whole (up
    to max_restarts), requeues are counted per replica (1.29+) and never charged, and a pod out
    of requeues fails it. Install it once (`kubectl apply -f`), then --cfg runtime=NAME."""
    opts = opts or RenderOptions()
    spec = job_policy(Role(TRAINJOB_NODE, "python", num_replicas=1, image="-"), opts)
    spec["template"] = {
        "spec": {
            "restartPolicy": "Never",  # the Job controller retries, not the kubelet
            "enableServiceLinks": False,
            # the image, command, args, env and resources are each TrainJob's trainer's
            "containers": [{"name": TRAINJOB_NODE, "image": "python:3.12-slim"}],
        }
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    **policies(max_restarts, opts),
                    "replicatedJobs": [
                        {
                            "name": TRAINJOB_NODE,
                            "template": {
                                "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                                "spec": spec,
                            },
                        }
                    ],
                }
            },
        },
    }
