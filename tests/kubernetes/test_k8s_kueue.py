"""`--cfg queue=NAME`: queued and suspended on every target, and `status` says where it waits.

The Workloads and LocalQueues the fake API server serves are what Kueue would write (its own
reasons, from kueue v0.19 ``pkg/controller/core/workload_controller.go`` and the scheduler)
and valid by Kueue's CRD schemas; the tests play Kueue (write them, unsuspend on admission).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from k8s_fake_apiserver import CRDS, FakeApiServer
from k8s_helpers import cli, echo_app, write_kubeconfig
from k8s_kubelet import FakeKubelet
from k8s_schemas import assert_valid, schema_errors

from tests.conftest import wait_until
from trainlaunch.schedulers.kubernetes.backend import KubernetesScheduler, create_scheduler
from trainlaunch.schedulers.kubernetes.trainjob import runtime_manifest
from trainlaunch.specs import AppState

QUEUE = "team-queue"
NO_QUOTA = (
    "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
    "default-flavor, 1 more needed"
)
PLURALS = {"job": "jobs", "jobset": "jobsets", "trainjob": "trainjobs"}


def submit(k8s: KubernetesScheduler, api: str, queue: str | None = QUEUE) -> str:
    cfg = {"api": api, "runtime": "trainlaunch", **({"queue": queue} if queue else {})}
    return k8s.schedule(k8s.submit_dryrun(echo_app(2), k8s.run_opts().resolve(cfg, "k8s")))


def local_queue(cluster_queue: str = "gpu-cq", version: str = "v1beta2") -> dict[str, Any]:
    lq = {
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "LocalQueue",
        "metadata": {"name": QUEUE, "namespace": "team"},
        "spec": {"clusterQueue": cluster_queue},
    }
    assert schema_errors(lq) == []
    return lq


def workload(owner: dict[str, Any], conditions: list[dict[str, Any]], version: str = "v1beta2",
             admitted_in: str | None = None) -> dict[str, Any]:  # fmt: skip
    """The Workload Kueue makes for owner, labelled with its uid."""
    meta = owner["metadata"]
    wl: dict[str, Any] = {
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "Workload",
        "metadata": {
            "name": f"{owner['kind'].lower()}-{meta['name']}-1a2b3",
            "namespace": meta["namespace"],
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
            "ownerReferences": [
                {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }  # fmt: skip
            ],
        },
        "spec": {
            "queueName": QUEUE,
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "template": {"spec": {"containers": [{"name": "echo", "image": "busybox"}]}},
                }  # fmt: skip
            ],
        },
        "status": {
            "conditions": [
                {"lastTransitionTime": "2030-01-01T00:00:00Z", "message": "", **c}
                for c in conditions
            ]
        },
    }
    if admitted_in:
        wl["status"]["admission"] = {
            "clusterQueue": admitted_in,
            "podSetAssignments": [{"name": "main", "count": 2}],
        }
    assert schema_errors(wl) == [], schema_errors(wl)
    return wl


def owner_of(fake_api: FakeApiServer, api: str, app_id: str) -> dict[str, Any]:
    name = app_id.split(":")[1]
    obj = fake_api.get(PLURALS[api], "team", name if api != "job" else f"{name}-echo")
    assert obj is not None
    return obj


@pytest.mark.parametrize("api", ["job", "jobset", "trainjob"])
def test_every_target_is_queued_and_suspended(k8s: KubernetesScheduler, api: str) -> None:
    info = k8s.submit_dryrun(
        echo_app(2), k8s.run_opts().resolve({"api": api, "queue": QUEUE}, "k8s")
    )
    first = info.request.resources[0]
    assert first["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == QUEUE
    assert first["spec"]["suspend"] is True
    assert_valid(list(info.request.resources))
    plain = k8s.submit_dryrun(echo_app(2), k8s.run_opts().resolve({"api": api}, "k8s"))
    assert "suspend" not in plain.request.resources[0]["spec"]


@pytest.mark.parametrize("api", ["job", "jobset", "trainjob"])
def test_status_says_where_kueue_holds_it(
    k8s: KubernetesScheduler, fake_api: FakeApiServer, api: str
) -> None:
    fake_api.put("localqueues", local_queue())
    app_id = submit(k8s, api)
    status = k8s.describe(app_id).status
    assert status.state == AppState.PENDING
    assert (
        status.msg
        == "waiting for admission in ClusterQueue gpu-cq (Kueue has not made its Workload yet)"
    )
    owner = owner_of(fake_api, api, app_id)
    pending = {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": NO_QUOTA}
    fake_api.put("workloads", workload(owner, [pending]))
    assert (
        k8s.describe(app_id).status.msg
        == f"waiting for admission in ClusterQueue gpu-cq: {NO_QUOTA}"
    )


def test_without_the_localqueue_it_names_the_localqueue(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id = submit(k8s, "jobset")
    owner = owner_of(fake_api, "jobset", app_id)
    missing = {"type": "QuotaReserved", "status": "False", "reason": "Misconfigured",
               "message": f"LocalQueue {QUEUE} doesn't exist"}  # fmt: skip
    fake_api.put("workloads", workload(owner, [missing]))
    msg = k8s.describe(app_id).status.msg
    assert msg == f"waiting for admission in LocalQueue {QUEUE}: LocalQueue {QUEUE} doesn't exist"
    # not allowed to read LocalQueues: the LocalQueue it is in, without guessing more
    fake_api.put("localqueues", local_queue())
    fake_api.fail("GET", r"/localqueues/", 403, "Forbidden", "localqueues is forbidden")
    assert k8s.describe(app_id).status.msg.startswith(
        f"waiting for admission in LocalQueue {QUEUE}:"
    )


def test_evicted_and_admitted(k8s: KubernetesScheduler, fake_api: FakeApiServer) -> None:
    fake_api.put("localqueues", local_queue())
    app_id = submit(k8s, "job")
    owner = owner_of(fake_api, "job", app_id)
    evicted = {"type": "Evicted", "status": "True", "reason": "Preempted",
               "message": "Preempted to accommodate a workload (UID: 4c1)"}  # fmt: skip
    fake_api.put("workloads", workload(owner, [evicted]))
    assert k8s.describe(app_id).status.msg == (
        "waiting for admission in ClusterQueue gpu-cq (evicted: Preempted to accommodate a "
        "workload (UID: 4c1))"
    )
    admitted = {"type": "Admitted", "status": "True", "reason": "Admitted"}
    fake_api.put("workloads", workload(owner, [admitted], admitted_in="gpu-cq"))  # replaces it
    assert k8s.describe(app_id).status.msg == "admitted by ClusterQueue gpu-cq; starting"


def test_an_older_kueue_serves_v1beta1_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    api = FakeApiServer(crds=("jobsets", "workloads/v1beta1", "localqueues/v1beta1")).start()
    try:
        s = create_scheduler("s", kubeconfig=str(write_kubeconfig(tmp_path / "kc", api.url)))
        app_id = submit(s, "jobset")
        owner = owner_of(api, "jobset", app_id)
        pending = {
            "type": "QuotaReserved",
            "status": "False",
            "reason": "Pending",
            "message": NO_QUOTA,
        }
        api.put("workloads", workload(owner, [pending], version="v1beta1"))
        # the LocalQueue at v1beta2 is not served: the LocalQueue it is in, then Kueue's reason
        assert (
            s.describe(app_id).status.msg
            == f"waiting for admission in LocalQueue {QUEUE}: {NO_QUOTA}"
        )
        s.close()
    finally:
        api.stop()


def test_without_kueue_it_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    api = FakeApiServer().start()
    try:
        s = create_scheduler("s", kubeconfig=str(write_kubeconfig(tmp_path / "kc", api.url)))
        app_id = submit(s, "job")
        assert s.describe(app_id).status.msg == (
            f"waiting for admission in LocalQueue {QUEUE} (Kueue's Workloads are not served "
            "here: is Kueue installed?)"
        )
        s.close()
    finally:
        api.stop()


@pytest.mark.parametrize("api", ["jobset", "trainjob"])
def test_admitted_it_runs_and_the_cli_shows_the_wait(tmp_path: Path, api: str) -> None:
    """Kueue holds it (status on the CLI), then admits it: the pods run, it succeeds."""
    server = FakeApiServer(crds=tuple(CRDS)).start()
    server.put("clustertrainingruntimes", runtime_manifest())
    server.put("localqueues", local_queue())
    kubelet = FakeKubelet(server).start()
    kubeconfig = write_kubeconfig(tmp_path / "kc", server.url)
    try:
        s = create_scheduler("tests", kubeconfig=str(kubeconfig))
        app_id = submit(s, api)
        handle = f"kubernetes://tests/{app_id}"
        out = cli(tmp_path, "status", handle, kubeconfig=kubeconfig)
        assert "waiting for admission in ClusterQueue gpu-cq" in out.stdout + out.stderr, out
        owner = owner_of(server, api, app_id)
        server.objects[(PLURALS[api], "team", owner["metadata"]["name"])]["spec"]["suspend"] = False
        wait_until(lambda: s.describe(app_id).state == AppState.SUCCEEDED, timeout=60,
                   what="the admitted app to succeed")  # fmt: skip
        assert list(s.log_iter(app_id, "echo", 1))
        s.close()
    finally:
        kubelet.stop()
        server.stop()
