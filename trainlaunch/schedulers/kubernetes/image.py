"""What makes a pod work in the image people already have (a stock PyTorch image): the agent
as a volume, the image's interpreter, and the metrics volume.

A role that runs trainlaunch's node agent (``python -m trainlaunch.agent ...``, as ``dist.ddp``
renders it) gets the agent zipapp (bundle.py) from a ConfigMap of the app mounted at
``/opt/trainlaunch``; a role whose entrypoint is plain ``python`` runs ``python3`` if the image
has it, else ``python`` (or what ``--cfg python`` names). Pure: no I/O.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from trainlaunch.specs import Role

if TYPE_CHECKING:
    from trainlaunch.schedulers.kubernetes.options import RenderOptions

AGENT_MODES = ("bundled", "image")  # the agent from the app's ConfigMap, or the image's own
AGENT_DIR = "/opt/trainlaunch"  # where the agent's ConfigMap is mounted (read-only)
AGENT_FILE = "agent.pyz"
AGENT_VOLUME = "trainlaunch-agent"
METRICS_VOLUME = "trainlaunch-metrics"
DEFAULT_METRICS_MOUNT = "/mnt/trainlaunch/metrics"
POD_METRICS_DIR = "/tmp/trainlaunch/metrics"  # without a PVC: inside the container
# The image's interpreter when a role says plain "python": python3 first (Debian/Ubuntu
# images have only that), else python (conda images have both); $0 is "python", "$@" the args.
PICK_PYTHON = (
    'for p in python3 python; do if command -v "$p" >/dev/null 2>&1; then exec "$p" "$@"; fi; '
    'done; echo "trainlaunch: the image has neither python3 nor python on its PATH; '
    'name its interpreter with --cfg python=PATH" >&2; exit 127'
)


def runs_agent(role: Role) -> bool:
    """Whether the role runs trainlaunch's node agent (``python -m trainlaunch.agent ...``)."""
    return tuple(role.args[:2]) == ("-m", "trainlaunch.agent")


def agent_configmap_name(name: str) -> str:
    """The app's agent ConfigMap (fits 63: the app name is at most 28 characters)."""
    return f"{name}-agent"


def agent_configmap(
    name: str, labels: dict[str, str], zipapp: bytes, namespace: str
) -> dict[str, Any]:
    """The ConfigMap holding the agent zipapp (the first Job becomes its owner on submission)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": agent_configmap_name(name),
            "namespace": namespace,
            "labels": dict(labels),
        },
        "immutable": True,  # the kubelet need not watch it
        "binaryData": {AGENT_FILE: base64.b64encode(zipapp).decode("ascii")},
    }


def container_command(role: Role, opts: RenderOptions) -> tuple[list[str], list[str]]:
    """The container's command and args: the bundled agent, and the image's interpreter."""
    args = list(role.args)
    if opts.agent == "bundled" and runs_agent(role):
        args = [f"{AGENT_DIR}/{AGENT_FILE}", *args[2:]]  # the zipapp for -m trainlaunch.agent
    if role.entrypoint != "python":  # a path or another name was chosen (dist.ddp --python)
        return [role.entrypoint], args
    if opts.python:
        return [opts.python], args
    return ["sh", "-c", PICK_PYTHON, "python"], args


def image_volumes(
    role: Role, name: str, opts: RenderOptions
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(volumeMount, volume) pairs: the agent's ConfigMap, the metrics PVC."""
    out: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if opts.agent == "bundled" and runs_agent(role):
        out.append(
            (
                {"name": AGENT_VOLUME, "mountPath": AGENT_DIR, "readOnly": True},
                {
                    "name": AGENT_VOLUME,
                    "configMap": {"name": agent_configmap_name(name), "defaultMode": 0o444},
                },
            )
        )
    if opts.metrics_pvc:
        out.append(
            (
                {"name": METRICS_VOLUME, "mountPath": opts.metrics_mount},
                {"name": METRICS_VOLUME, "persistentVolumeClaim": {"claimName": opts.metrics_pvc}},
            )
        )
    return out
