"""The apps and options rendered into golden manifests (shared by render and schema tests)."""

from __future__ import annotations

from typing import Any

from k8s_helpers import echo_app

from components import dist
from trainlaunch import settings
from trainlaunch.schedulers.kubernetes.backend import KubernetesScheduler
from trainlaunch.schedulers.kubernetes.names import app_name
from trainlaunch.schedulers.kubernetes.options import RenderOptions
from trainlaunch.schedulers.kubernetes.render import render_app
from trainlaunch.specs import AppDef, Resource, RetryPolicy, Role

SESSION = "tests"
# Stands in for the real zipapp in golden files, which would otherwise change with every
# change to the agent's code (the real one is tested in test_k8s_bundle.py).
GOLDEN_ZIPAPP = b"agent.pyz as bundled by trainlaunch"
STOCK_IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"


def stock_ddp_app(**component: object) -> AppDef:
    """dist.ddp on 2 nodes x 4 workers in an official PyTorch image, as `run` injects it."""
    app = dist.ddp(
        "train.py", "--lr", "0.1", image=STOCK_IMAGE, nnodes="2", nproc_per_node="4", **component
    )
    return app


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
    "termination_grace_period": 120,
}

# name -> (app, cfg, random suffix): each renders to tests/golden/kubernetes/<name>.yaml
CASES: dict[str, tuple[AppDef, dict[str, Any], str]] = {
    "echo_defaults": (echo_app(2), {"namespace": "team"}, "x7k2p"),
    "ddp_all_options": (ddp_app(), ALL_OPTIONS, "4f9zq"),
    "long_names": (long_app(), {"namespace": "n" * 63}, "00000"),
    # the image's interpreter: python3-else-python (default), python3 (cfg), python (cfg)
    "ddp_stock_image": (stock_ddp_app(), {"namespace": "team"}, "s70ck"),
    "ddp_python3_metrics_pvc": (
        stock_ddp_app(),
        {
            "namespace": "team",
            "python": "python3",
            "metrics_pvc": "train-metrics",
            "metrics_local_dir": "/nfs/train-metrics",
        },
        "pvc00",
    ),
    "ddp_image_agent": (
        stock_ddp_app(),
        {"namespace": "team", "agent": "image", "python": "python"},
        "img00",
    ),
}


def render_case(name: str, zipapp: bytes = GOLDEN_ZIPAPP) -> list[dict[str, Any]]:
    """The manifests of one case (dist.ddp cases with the rank settings injected, as by run)."""
    app, cfg, suffix = CASES[name]
    resolved = KubernetesScheduler(SESSION).run_opts().resolve(cfg, "kubernetes")
    opts = RenderOptions.from_cfg(resolved, cfg["namespace"])
    if name.startswith("ddp_") and name != "ddp_all_options":
        rs = settings.RankSettings(seed=7, metrics_path=opts.metrics_path())
        app = settings.inject(app, rs, f"kubernetes://{SESSION}/")
    return render_app(app, app_name(app.name, suffix), SESSION, opts, zipapp)
