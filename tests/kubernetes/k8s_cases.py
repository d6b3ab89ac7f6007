"""The apps and options rendered into golden manifests (shared by render and schema tests)."""

from __future__ import annotations

from typing import Any

from k8s_helpers import echo_app

from trainlaunch.schedulers.kubernetes.backend import KubernetesScheduler
from trainlaunch.schedulers.kubernetes.render import RenderOptions, app_name, render_app
from trainlaunch.specs import AppDef, Resource, RetryPolicy, Role

SESSION = "tests"


def ddp_app() -> AppDef:
    """Two roles: 4 GPU trainers with per-replica retries and a parameter server."""
    trainer = Role(
        name="trainer",
        entrypoint="bash",
        args=(
            "-c",
            "torchrun --nnodes 4 --node-rank ${replica_id} "
            "--master-addr ${${rank0_env}:=localhost} --master-port $TRAINLAUNCH_RDZV_PORT "
            "train.py --out /ckpt/${app_id} --date $(date +%F)",
        ),
        image="ghcr.io/acme/train:1.4",
        env={
            "NCCL_DEBUG": "INFO",
            "OUT": "/ckpt/${app_id}/${replica_id}",
            "TRAINLAUNCH_SEED": "1234",
        },
        num_replicas=4,
        max_retries=3,
        retry_policy=RetryPolicy.REPLICA,
        resource=Resource(cpu=32, gpu=8, memMB=256_000),
        port_map={"tensorboard": 6006},
    )
    ps = Role(
        name="param_server",
        entrypoint="python",
        args=("-m", "ps"),
        image="ghcr.io/acme/train:1.4",
        num_replicas=1,
        max_retries=2,
        resource=Resource(cpu=8, gpu=0, memMB=0),
    )
    return AppDef("DDP.Train", (trainer, ps))


def long_app() -> AppDef:
    """Names at the 63-character limit and 1000 replicas (a 3-digit index suffix)."""
    return AppDef(
        "a" * 63, (Role(name="R" * 63, entrypoint="true", image="busybox", num_replicas=1000),)
    )


ALL_OPTIONS: dict[str, Any] = {
    "namespace": "ml-team",
    "server_version": "1.33",
    "service_account": "trainer",
    "priority_class": "high-priority",
    "node_selector": {"node.kubernetes.io/instance-type": "p4d.24xlarge"},
    "tolerations": ["nvidia.com/gpu:NoSchedule", "dedicated=ml:NoExecute", "spot"],
    "labels": {"team": "ml", "cost-center": "42"},
    "annotations": {"owner": "alice@example.com"},
    "image_pull_secrets": ["regcred"],
    "image_pull_policy": "IfNotPresent",
    "shm_size": "64Gi",
    "rdzv_port": 29400,
}

# name -> (app, cfg, random suffix): each renders to tests/golden/kubernetes/<name>.yaml
CASES: dict[str, tuple[AppDef, dict[str, Any], str]] = {
    "echo_defaults": (echo_app(2), {"namespace": "team"}, "x7k2p"),
    "ddp_all_options": (ddp_app(), ALL_OPTIONS, "4f9zq"),
    "long_names": (long_app(), {"namespace": "n" * 63}, "00000"),
}


def render_case(name: str) -> list[dict[str, Any]]:
    """The manifests of one case."""
    app, cfg, suffix = CASES[name]
    resolved = KubernetesScheduler(SESSION).run_opts().resolve(cfg, "kubernetes")
    return render_app(
        app, app_name(app.name, suffix), SESSION, RenderOptions.from_cfg(resolved, cfg["namespace"])
    )
