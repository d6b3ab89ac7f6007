"""End to end on a real cluster: runs only when TRAINLAUNCH_K8S_CONTEXT names a kubeconfig context.

    TRAINLAUNCH_K8S_CONTEXT=kind-kind pytest tests/kubernetes/test_k8s_e2e.py

Optional: TRAINLAUNCH_K8S_NAMESPACE (default: the context's namespace) and
TRAINLAUNCH_K8S_IMAGE (default python:3.11-slim; any image with python3). The cluster must be
able to pull the image. Every app is stopped at the end, passing or failing.

The targets: TRAINLAUNCH_K8S_TARGETS=job,jobset,trainjob (default job) runs the contract and
`kubectl apply --dry-run=server` of the CLI's dry runs on each (jobset: the JobSet controller
installed; trainjob: Kubeflow Trainer and the runtime TRAINLAUNCH_K8S_RUNTIME, default
`trainlaunch`, docs/kubernetes.md). TRAINLAUNCH_K8S_QUEUE=NAME: a LocalQueue that admits a
small app, to run one through Kueue.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from trainlaunch.errors import AppNotFound
from trainlaunch.schedulers.kubernetes.backend import (
    KubernetesScheduler,
    create_scheduler,
    parse_app_id,
)
from trainlaunch.specs import AppDef, AppState, Resource, Role

CONTEXT = os.environ.get("TRAINLAUNCH_K8S_CONTEXT", "")
NAMESPACE = os.environ.get("TRAINLAUNCH_K8S_NAMESPACE") or None
IMAGE = os.environ.get("TRAINLAUNCH_K8S_IMAGE") or "python:3.11-slim"
DEADLINE = 300.0  # seconds: image pulls on a fresh cluster are slow
TARGETS = [t for t in os.environ.get("TRAINLAUNCH_K8S_TARGETS", "job").split(",") if t]
RUNTIME = os.environ.get("TRAINLAUNCH_K8S_RUNTIME") or "trainlaunch"
QUEUE = os.environ.get("TRAINLAUNCH_K8S_QUEUE", "")

pytestmark = [
    pytest.mark.kubernetes_e2e,
    pytest.mark.skipif(
        not CONTEXT,
        reason="set TRAINLAUNCH_K8S_CONTEXT to a kubeconfig context to run against a real cluster",
    ),
]

# Replica 0 listens on the rendezvous port; the others resolve rank 0's DNS name and connect.
RENDEZVOUS = """
import os, socket, time
rid, host, port = int(os.environ["TRAINLAUNCH_REPLICA_ID"]), os.environ["TRAINLAUNCH_RANK0_HOST"], int(os.environ["TRAINLAUNCH_RDZV_PORT"])
print("replica", rid, "seed", os.environ.get("TRAINLAUNCH_SEED"), flush=True)
if rid == 0:
    srv = socket.create_server(("", port)); srv.settimeout(240)
    for _ in range(int(os.environ["TRAINLAUNCH_NUM_REPLICAS"]) - 1):
        conn, _ = srv.accept(); print("rank 0 got", conn.recv(64).decode(), flush=True); conn.close()
else:
    deadline = time.time() + 240
    while True:
        try:
            with socket.create_connection((host, port), timeout=5) as c:
                c.sendall(f"hello from {rid}".encode()); break
        except OSError:
            if time.time() > deadline: raise
            time.sleep(1)
    print("connected to", host, flush=True)
"""


def wait_for(what: str, check: Callable[[], Any]) -> Any:
    """Poll check until it returns something truthy, or fail after DEADLINE."""
    end = time.time() + DEADLINE
    while time.time() < end:
        result = check()
        if result:
            return result
        time.sleep(2)
    pytest.fail(f"timed out waiting for {what}")


class Cluster:
    """The scheduler under test and the apps it started (all stopped at the end)."""

    def __init__(self) -> None:
        self.k8s = create_scheduler("e2e", context=CONTEXT, namespace=NAMESPACE)
        self.started: list[str] = []

    def run(
        self, name: str, args: tuple[str, ...], replicas: int = 2, cfg: Any = None, **role: Any
    ) -> str:
        fields: dict[str, Any] = {
            "resource": Resource(cpu=1, gpu=0, memMB=256),
            "env": {"TRAINLAUNCH_SEED": "4242"},
            **role,
        }
        app = AppDef(
            name,
            (Role("worker", "python3", args=args, image=IMAGE, num_replicas=replicas, **fields),),
        )
        opts = {"context": CONTEXT, "runtime": RUNTIME, **(cfg or {})}
        resolved = self.k8s.run_opts().resolve(opts, "kubernetes")
        app_id = self.k8s.schedule(self.k8s.submit_dryrun(app, resolved))
        self.started.append(app_id)
        return app_id


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    yield c
    for app_id in c.started:
        with contextlib.suppress(AppNotFound):
            c.k8s.cancel(app_id)
    c.k8s.close()


def terminal(k8s: KubernetesScheduler, app_id: str) -> Any:
    status = k8s.describe(app_id).status
    return status if status.is_terminal else None


@pytest.mark.parametrize("api", TARGETS)
def test_contract_run_logs_stop_list(cluster: Cluster, api: str) -> None:
    k8s = cluster.k8s
    echo = cluster.run("e2e-echo", ("-c", RENDEZVOUS), cfg={"api": api})
    status = wait_for("echo to finish", lambda: terminal(k8s, echo))
    assert status.state == AppState.SUCCEEDED, status.msg
    assert list(k8s.log_iter(echo, "worker", 0))[:2] == [
        "replica 0 seed 4242",
        "rank 0 got hello from 1",
    ]
    lines = list(k8s.log_iter(echo, "worker", 1))
    assert lines[0] == "replica 1 seed 4242" and lines[1].startswith("connected to ")

    sleeper = cluster.run(
        "e2e-sleep",
        ("-c", "import time; print('up', flush=True); time.sleep(600)"),
        1,
        cfg={"api": api},
    )
    wait_for("the sleeper to run", lambda: k8s.describe(sleeper).state == AppState.RUNNING)
    assert [r.app_id for r in k8s.list() if r.app_id in (echo, sleeper)] == [echo, sleeper]
    k8s.cancel(sleeper)
    assert k8s.describe(sleeper).state == AppState.CANCELLED  # from the record stop keeps
    ns, name = parse_app_id(sleeper)
    from kubernetes import client, config

    config.load_kube_config(context=CONTEXT)
    core = client.CoreV1Api()
    wait_for(
        "the sleeper's pods to go",
        lambda: not core.list_namespaced_pod(ns, label_selector=f"trainlaunch.io/app={name}").items,
    )


def test_failure_reports_the_exit_code(cluster: Cluster) -> None:
    k8s = cluster.k8s
    app_id = cluster.run(
        "e2e-fail",
        ("-c", "import os, sys; sys.exit(3 if os.environ['TRAINLAUNCH_REPLICA_ID'] == '1' else 0)"),
    )
    status = wait_for("the app to fail", lambda: terminal(k8s, app_id))
    assert (status.state, status.exit_code) == (AppState.FAILED, 3), status.msg
    assert "replica 1 exited with code 3" in status.msg


def test_unschedulable_is_explained(cluster: Cluster) -> None:
    k8s = cluster.k8s
    app_id = cluster.run(
        "e2e-huge", ("-c", "pass"), 1, resource=Resource(cpu=10_000, gpu=0, memMB=256)
    )
    status = wait_for(
        "the scheduler's verdict",
        lambda: (s := k8s.describe(app_id).status) and "Unschedulable" in s.msg and s,
    )
    assert status.state == AppState.PENDING


def test_follow_prints_each_line_as_it_comes(cluster: Cluster) -> None:
    k8s = cluster.k8s
    app_id = cluster.run(
        "e2e-tail",
        ("-c", "import time\nfor i in range(5):\n    print('tick', i, flush=True); time.sleep(1)"),
        1,
    )
    assert list(k8s.log_iter(app_id, "worker", 0, should_tail=True)) == [
        f"tick {i}" for i in range(5)
    ]


@pytest.mark.parametrize("api", TARGETS)
def test_kubectl_takes_the_dry_run(tmp_path: Any, api: str) -> None:
    """What `run --dryrun` prints (placeholders, masked secrets) is accepted by the server."""
    import shutil
    import subprocess
    import sys

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    ns = ["--cfg", f"namespace={NAMESPACE}"] if NAMESPACE else []
    out = subprocess.run(
        [sys.executable, "-m", "trainlaunch", "run", "-s", "k8s", "--dryrun", "--cfg",
         f"context={CONTEXT},api={api},runtime={RUNTIME}", *ns, "dist.ddp", "--image", IMAGE,
         "--nnodes", "2", "--env", "HF_TOKEN=hf_e2e", "train.py"],
        capture_output=True, text=True, check=True, env={**os.environ, "TRAINLAUNCH_CONFIG": ""},
    )  # fmt: skip
    applied = subprocess.run(
        ["kubectl", "--context", CONTEXT, "apply", "--dry-run=server", "-f", "-"],
        input=out.stdout, capture_output=True, text=True,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr


@pytest.mark.skipif(not QUEUE, reason="set TRAINLAUNCH_K8S_QUEUE to a Kueue LocalQueue")
def test_kueue_admits_it(cluster: Cluster) -> None:
    k8s = cluster.k8s
    app_id = cluster.run("e2e-queued", ("-c", "print('admitted')"), 1, cfg={"queue": QUEUE})
    status = wait_for("Kueue to admit and the app to end", lambda: terminal(k8s, app_id))
    assert status.state == AppState.SUCCEEDED, status.msg
