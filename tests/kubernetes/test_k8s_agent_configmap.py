"""The agent's ConfigMap on the wire (created, owned by the Job, gone with it) and `metrics` of
Kubernetes apps, with the real client and CLI against the fake API server."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_fake_apiserver import FakeApiServer

from components import dist
from trainlaunch import settings
from trainlaunch.errors import SchedulerError, UsageError
from trainlaunch.runner import get_runner
from trainlaunch.schedulers.kubernetes.backend import KubernetesScheduler
from trainlaunch.schedulers.kubernetes.bundle import build_agent_zipapp
from trainlaunch.specs import AppDef

IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"


def ddp() -> AppDef:
    return dist.ddp("train.py", image=IMAGE, nnodes="2", nproc_per_node="2")


def submit(k8s: KubernetesScheduler, app: AppDef, **cfg: Any) -> tuple[str, Any]:
    info = k8s.submit_dryrun(app, k8s.run_opts().resolve(cfg, "kubernetes"))
    return k8s.schedule(info), info


def test_the_configmap_is_created_after_the_job_and_owned_by_it(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id, info = submit(k8s, ddp())
    posts = [r for r in fake_api.requests if r.method == "POST"]
    assert [r.path.rsplit("/", 1)[1] for r in posts] == ["jobs", "configmaps", "services"]
    job_doc, cm_doc, _ = yaml.safe_load_all(str(info))
    owner = posts[1].body["metadata"].pop("ownerReferences")
    assert posts[1].body == cm_doc  # exactly the dryrun's, plus the owner
    job = fake_api.get("jobs", "team", job_doc["metadata"]["name"])
    assert job is not None
    assert owner == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"],
        }
    ]
    stored = fake_api.get("configmaps", "team", cm_doc["metadata"]["name"])
    assert stored is not None and stored["immutable"] is True
    assert base64.b64decode(stored["binaryData"]["agent.pyz"]) == build_agent_zipapp()
    # the pods mount it where their command looks for the agent
    pod = job["spec"]["template"]["spec"]
    assert {"name": "trainlaunch-agent", "mountPath": "/opt/trainlaunch", "readOnly": True} in (
        pod["containers"][0]["volumeMounts"]
    )
    assert pod["containers"][0]["args"][0] == "/opt/trainlaunch/agent.pyz"


def test_stop_deletes_the_configmap_with_the_job(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id, _ = submit(k8s, ddp())
    assert len(fake_api.names("configmaps", "team")) == 1
    k8s.cancel(app_id)
    assert fake_api.names("configmaps", "team") == []
    assert fake_api.names("jobs", "team") == [] and fake_api.names("services", "team") == []
    job_delete = next(r for r in fake_api.requests if r.method == "DELETE")
    assert "/jobs/" in job_delete.path and job_delete.query == {"propagationPolicy": "Background"}
    # deleted by name too, so it goes even where no garbage collector runs
    deletes = [r.path.split("/")[-2:] for r in fake_api.requests if r.method == "DELETE"]
    assert ["configmaps", f"{app_id.split(':')[1]}-agent"] in deletes


def test_stop_deletes_an_orphaned_configmap(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id, _ = submit(k8s, ddp())
    (cm,) = fake_api.names("configmaps", "team")
    stored = fake_api.get("configmaps", "team", cm)
    assert stored is not None
    del stored["metadata"]["ownerReferences"]  # as if the garbage collector did not know it
    fake_api.put("configmaps", stored)
    k8s.cancel(app_id)
    assert fake_api.names("configmaps", "team") == []


def test_agent_image_and_plain_apps_create_no_configmap(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    submit(k8s, ddp(), agent="image")
    submit(k8s, dist.ddp("t.py", image=IMAGE, python="/opt/conda/bin/python"), agent="image")
    assert fake_api.names("configmaps", "team") == []
    assert not any("configmaps" in r.path for r in fake_api.requests if r.method == "POST")


def test_a_refused_configmap_rolls_back_the_job(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    fake_api.fail(
        "POST",
        r"/configmaps$",
        403,
        "Forbidden",
        'configmaps is forbidden: User "alice" cannot create resource "configmaps"',
    )
    with pytest.raises(SchedulerError, match="forbidden by RBAC"):
        submit(k8s, ddp())
    assert fake_api.names("jobs", "team") == [] and fake_api.names("configmaps", "team") == []


# -- metrics -------------------------------------------------------------------------------------


def cli(*args: str, kubeconfig: Path, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), settings.HOME: str(home)}
    return subprocess.run(
        [sys.executable, "-m", "trainlaunch", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_ddp(kubeconfig: Path, home: Path, tmp_path: Path, *cfg: str) -> str:
    r = cli(
        "run",
        "-s",
        "kubernetes",
        *[a for c in cfg for a in ("--cfg", c)],
        "dist.ddp",
        "--image",
        IMAGE,
        "--nnodes",
        "2",
        "train.py",
        kubeconfig=kubeconfig,
        home=home,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def run_in_process(kubeconfig: Path, monkeypatch: pytest.MonkeyPatch, **cfg: str) -> Any:
    """run + describe through the Runner, as the CLI does; returns (runner, handle, resp)."""
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    runner = get_runner("tests")
    handle = runner.run(ddp(), "kubernetes", cfg)
    return runner, handle, runner.describe_app(handle)


def test_every_pod_gets_the_metrics_path(
    kubeconfig: Path, fake_api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, handle, resp = run_in_process(kubeconfig, monkeypatch)
    (job,) = [o for (r, _, _), o in fake_api.objects.items() if r == "jobs"]
    env = {
        e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env[settings.METRICS_PATH] == "/tmp/trainlaunch/metrics/"
    # ... but this machine cannot read it: one line says where they are and what to do
    with runner, pytest.raises(UsageError) as e:
        runner.metrics_location(handle, resp)
    assert str(e.value).startswith("the metrics of team:") and "\n" not in str(e.value)
    assert "inside its pods" in str(e.value) and "kubectl cp" in str(e.value)
    assert "metrics_pvc" in str(e.value) and e.value.hint


def test_metrics_on_a_pvc_mounted_here(
    kubeconfig: Path, fake_api: FakeApiServer, tmp_path: Path
) -> None:
    share = tmp_path / "nfs"
    handle = run_ddp(
        kubeconfig,
        tmp_path / "home",
        tmp_path,
        "metrics_pvc=train-metrics",
        f"metrics_local_dir={share}",
    )
    (job,) = [o for (r, _, _), o in fake_api.objects.items() if r == "jobs"]
    spec = job["spec"]["template"]["spec"]
    name = job["metadata"]["labels"]["trainlaunch.io/app"]
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env[settings.METRICS_PATH] == f"/mnt/trainlaunch/metrics/{name}/"
    assert {
        "name": "trainlaunch-metrics",
        "persistentVolumeClaim": {"claimName": "train-metrics"},
    } in (spec["volumes"])
    # what the pods wrote on the claim, seen through this machine's mount of the same storage
    (share / name).mkdir(parents=True)
    for rank in (0, 1):
        (share / name / f"rank{rank}.jsonl").write_text(
            json.dumps({"step": 3, "epoch": 0, "rank": rank, "loss": 0.5 + rank}) + "\n"
        )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = cli(
        "metrics", handle, "--json", kubeconfig=kubeconfig, home=tmp_path / "home", cwd=elsewhere
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["metrics"] == ["loss"] and set(doc["latest"]) == {"0", "1"}


def test_metrics_on_a_pvc_not_mounted_here(
    kubeconfig: Path, fake_api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, handle, resp = run_in_process(kubeconfig, monkeypatch, metrics_pvc="train-metrics")
    with runner, pytest.raises(UsageError) as e:
        runner.metrics_location(handle, resp)
    assert "PersistentVolumeClaim 'train-metrics'" in str(e.value) and "--path" in str(e.value)
    assert "metrics_local_dir" in (e.value.hint or "")
