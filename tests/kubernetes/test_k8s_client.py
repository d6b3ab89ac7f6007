"""The real ``kubernetes`` client talking HTTP to a fake API server: submit, status, logs, stop, list.

The fake plays the Job controller and the kubelet (tests add pods and set their states); what
is tested is trainlaunch's side of the wire: the requests it sends and how it reads answers.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_fake_apiserver import FakeApiServer
from k8s_helpers import TOKEN, echo_app, write_kubeconfig

from trainlaunch.errors import AppNotFound, SchedulerError, SchedulerUnavailable, UsageError
from trainlaunch.schedulers.api import Stream
from trainlaunch.schedulers.kubernetes.backend import KubernetesScheduler, create_scheduler
from trainlaunch.schedulers.kubernetes.logs import LogReader
from trainlaunch.specs import AppDef, AppState, Role

RUNNING = {"running": {"startedAt": "2030-01-01T00:00:05Z"}}


def submit(k8s: KubernetesScheduler, app: AppDef | None = None, **cfg: Any) -> str:
    info = k8s.submit_dryrun(app or echo_app(2), k8s.run_opts().resolve(cfg, "kubernetes"))
    return k8s.schedule(info)


def job_of(app_id: str, role: str = "echo") -> str:
    return f"{app_id.split(':')[1]}-{role}"


def test_submit_sends_exactly_the_dryrun(k8s: KubernetesScheduler, fake_api: FakeApiServer) -> None:
    info = k8s.submit_dryrun(echo_app(2), k8s.run_opts().resolve({}, "kubernetes"))
    app_id = k8s.schedule(info)
    assert app_id == info.app_id and app_id.startswith("team:")  # the context's namespace
    posts = [r for r in fake_api.requests if r.method == "POST"]
    assert [r.path.rsplit("/", 1)[1] for r in posts] == ["jobs", "services"]
    job_doc, svc_doc = yaml.safe_load_all(str(info))
    assert posts[0].body == job_doc
    # The Service is the dryrun's plus an owner reference to the Job just created.
    owner = posts[1].body["metadata"].pop("ownerReferences")
    assert posts[1].body == svc_doc
    stored = fake_api.get("jobs", "team", job_doc["metadata"]["name"])
    assert stored is not None
    assert owner == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job_doc["metadata"]["name"],
            "uid": stored["metadata"]["uid"],
        }
    ]
    assert all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in fake_api.requests)


def test_namespace_and_context_options(tmp_path: Path, fake_api: FakeApiServer) -> None:
    kc = write_kubeconfig(tmp_path / "kc", fake_api.url)
    s = create_scheduler("s", kubeconfig=str(kc))
    assert submit(s, namespace="other-ns").startswith("other-ns:")
    assert submit(s, context="other").startswith("default:")  # a context without a namespace
    with pytest.raises(UsageError, match="kube context 'nope' not found"):
        submit(s, context="nope")
    assert create_scheduler("s", kubeconfig=str(kc), namespace="mine").list() == []
    # Jobs, then JobSets and TrainJobs (their CRDs are not installed here: 404, no apps)
    assert [r.path for r in fake_api.requests[-3:]] == [
        "/apis/batch/v1/namespaces/mine/jobs",
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/mine/jobsets",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/mine/trainjobs",
    ]


def test_status_from_pending_to_succeeded(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id = submit(k8s)
    job = job_of(app_id)
    assert k8s.describe(app_id).status.msg == "2/2 replicas pending; replica 0: no pod yet"

    unsched = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient cpu.",
        }
    ]
    p0 = fake_api.add_pod("team", job, 0, "Pending", conditions=unsched)
    p1 = fake_api.add_pod(
        "team",
        job,
        1,
        "Pending",
        state={"waiting": {"reason": "ErrImagePull", "message": "not found"}},
    )
    d = k8s.describe(app_id)
    assert d.state == AppState.PENDING
    assert (
        d.status.msg
        == "2/2 replicas pending; replica 0: Unschedulable: 0/3 nodes are available: 3 Insufficient cpu."
    )
    assert d.status.roles[0].replicas[1].message == "ErrImagePull: not found"

    fake_api.set_pod("team", p0, "Running", RUNNING)
    fake_api.set_pod("team", p1, "Running", RUNNING)
    fake_api.set_job_status("team", job, active=2, ready=2)
    d = k8s.describe(app_id)
    assert d.state == AppState.RUNNING
    assert [r.state for r in d.status.replicas()] == [AppState.RUNNING] * 2

    for p in (p0, p1):
        fake_api.set_pod(
            "team", p, "Succeeded", {"terminated": {"exitCode": 0, "reason": "Completed"}}
        )
    fake_api.set_job_status(
        "team",
        job,
        succeeded=2,
        conditions=[
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached"},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached"},
        ],
    )
    d = k8s.describe(app_id)
    assert d.state == AppState.SUCCEEDED
    assert d.app == echo_app(2) and d.metadata["namespace"] == "team"


def test_status_failed_with_exit_code(k8s: KubernetesScheduler, fake_api: FakeApiServer) -> None:
    app_id = submit(k8s)
    job = job_of(app_id)
    fake_api.add_pod("team", job, 0, "Running", RUNNING)
    fake_api.add_pod("team", job, 1, "Failed", {"terminated": {"exitCode": 7, "reason": "Error"}})
    fake_api.set_job_status(
        "team",
        job,
        failed=1,
        conditions=[
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
            }
        ],
    )
    s = k8s.describe(app_id).status
    assert (s.state, s.exit_code) == (AppState.FAILED, 7)
    assert s.msg == (
        "BackoffLimitExceeded: Job has reached the specified backoff limit; "
        "replica 1 exited with code 7 (Error)"
    )


def test_unknown_and_malformed_app_ids(k8s: KubernetesScheduler, fake_api: FakeApiServer) -> None:
    with pytest.raises(AppNotFound, match="no kubernetes app team:nope-12345"):
        k8s.describe("team:nope-12345")
    fake_api.fail("GET", r"/namespaces/gone/jobs$", 404, "NotFound", 'namespaces "gone" not found')
    with pytest.raises(AppNotFound):
        k8s.describe("gone:x-12345")
    with pytest.raises(AppNotFound):
        k8s.cancel("team:nope-12345")
    with pytest.raises(UsageError, match="NAMESPACE:NAME"):
        k8s.describe("no-namespace")


def test_create_conflict_is_already_exists(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    info = k8s.submit_dryrun(echo_app(), k8s.run_opts().resolve({}, "kubernetes"))
    job = info.request.resources[0]
    fake_api.put("jobs", job)  # someone else's Job with that name
    with pytest.raises(SchedulerError, match="already exists") as e:
        k8s.schedule(info)
    assert "\n" not in str(e.value)
    assert not [r for r in fake_api.requests if r.method == "DELETE"]  # theirs stays
    assert fake_api.names("services", "team") == []


def test_forbidden_service_rolls_back_the_job(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    fake_api.fail(
        "POST",
        r"/services$",
        403,
        "Forbidden",
        'services is forbidden: User "alice" cannot create resource "services" in API '
        'group "" in the namespace "team"',
    )
    with pytest.raises(SchedulerError, match="forbidden by RBAC") as e:
        submit(k8s)
    assert 'cannot create resource "services"' in str(e.value)
    assert "kubectl auth can-i" in (e.value.hint or "")
    assert fake_api.names("jobs", "team") == []  # nothing half-submitted
    assert [r.query for r in fake_api.requests if r.method == "DELETE"] == [
        {"propagationPolicy": "Background"}
    ]


def test_forbidden_reads_and_unauthorized(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    fake_api.fail(
        "GET", r"/jobs$", 403, "Forbidden", 'jobs.batch is forbidden: User "bob" cannot list'
    )
    with pytest.raises(SchedulerError, match="forbidden by RBAC.*cannot list"):
        k8s.describe("team:x-12345")
    fake_api.fail("GET", r"/jobs$", 401, "Unauthorized", "Unauthorized")
    with pytest.raises(SchedulerError, match="rejected the credentials"):
        k8s.list()


def test_stop_deletes_everything_in_the_background(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id = submit(k8s)
    job = job_of(app_id)
    fake_api.add_pod("team", job, 0, "Running", RUNNING)
    fake_api.add_pod("team", job, 1, "Running", RUNNING)
    k8s.cancel(app_id)
    deletes = [r for r in fake_api.requests if r.method == "DELETE"]
    assert [(r.path.split("/")[-2], r.query) for r in deletes] == [
        ("jobs", {"propagationPolicy": "Background"}),
        ("services", {"propagationPolicy": "Background"}),
    ]
    # The fake orphans pods unless told Background/Foreground, as batch/v1 does.
    assert fake_api.names("pods", "team") == [] and fake_api.names("services", "team") == []
    # the Jobs are gone, but what happened to the app is not forgotten
    assert k8s.describe(app_id).status.state == AppState.CANCELLED
    assert {r.app_id: r.state for r in k8s.list()}[app_id] == AppState.CANCELLED
    k8s.cancel(app_id)  # stopping twice is not an error


def test_stop_of_an_app_deleted_meanwhile(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id = submit(k8s)
    fake_api.fail("DELETE", r"/jobs/", 404, "NotFound", 'jobs.batch "x" not found')
    fake_api.fail("DELETE", r"/services/", 404, "NotFound", 'services "x" not found')
    with pytest.raises(AppNotFound):
        k8s.cancel(app_id)


def test_list_shows_trainlaunch_apps_in_the_namespace(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    first = submit(k8s)
    second = submit(
        k8s, AppDef("two", (Role("a", "true", image="i"), Role("b", "true", image="i")))
    )
    fake_api.put("jobs", {"metadata": {"name": "not-ours", "namespace": "team"}, "spec": {}})
    fake_api.set_job_status(
        "team", job_of(first), conditions=[{"type": "Complete", "status": "True"}]
    )
    fake_api.set_job_status("team", job_of(second, "a"), ready=1)
    rows = k8s.list()
    assert [(r.app_id, r.state, r.name) for r in rows] == [  # newest first, as every backend
        (second, AppState.RUNNING, "two"),
        (first, AppState.SUCCEEDED, "echo"),
    ]
    assert rows[1].app_handle == f"kubernetes://tests/{first}" and rows[1].created is not None
    assert (
        fake_api.requests[-1].query["labelSelector"] == "app.kubernetes.io/managed-by=trainlaunch"
    )


def test_logs_line_by_line(k8s: KubernetesScheduler, fake_api: FakeApiServer) -> None:
    app_id = submit(k8s)
    job = job_of(app_id)
    p1 = fake_api.add_pod("team", job, 1, "Running", RUNNING)
    fake_api.add_pod("team", job, 0, "Running", RUNNING)
    # A JSON-looking line stays text (old clients parsed it into a dict).
    fake_api.logs[("team", p1)].write('replica 1\n{"a": "b"}\n\nno newline at the end')
    assert list(k8s.log_iter(app_id, "echo", 1)) == [
        "replica 1",
        '{"a": "b"}',
        "",
        "no newline at the end",
    ]
    assert list(k8s.log_iter(app_id, "echo", 1, regex=r"^\{")) == ['{"a": "b"}']
    log_req = [r for r in fake_api.requests if r.path.endswith("/log")][-1]
    assert log_req.path.endswith(f"/pods/{p1}/log") and log_req.query["container"] == "echo"
    assert k8s.log_replicas(app_id, "echo") == [0, 1]


def test_logs_of_a_retried_replica_come_from_its_newest_pod(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id = submit(k8s)
    old = fake_api.add_pod("team", job_of(app_id), 0, "Failed", {"terminated": {"exitCode": 1}})
    new = fake_api.add_pod("team", job_of(app_id), 0, "Running", RUNNING)
    fake_api.logs[("team", old)].write("attempt 1\n")
    fake_api.logs[("team", new)].write("attempt 2\n")
    assert list(k8s.log_iter(app_id, "echo", 0)) == ["attempt 2"]


def test_logs_before_the_container_started(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id = submit(k8s)
    assert list(k8s.log_iter(app_id, "echo", 0)) == []  # no pod yet
    fake_api.add_pod("team", job_of(app_id), 0, "Pending")
    assert list(k8s.log_iter(app_id, "echo", 0)) == []  # nothing has run yet
    assert not [r for r in fake_api.requests if r.path.endswith("/log")]


def test_logs_while_a_retry_waits_show_the_last_attempt(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id = submit(k8s)
    old = fake_api.add_pod("team", job_of(app_id), 0, "Failed", {"terminated": {"exitCode": 1}})
    fake_api.add_pod("team", job_of(app_id), 0, "Pending")
    fake_api.logs[("team", old)].write("Traceback: boom\n")
    assert list(k8s.log_iter(app_id, "echo", 0)) == ["Traceback: boom"]


def test_logs_since_and_until(k8s: KubernetesScheduler, fake_api: FakeApiServer) -> None:
    app_id = submit(k8s)
    p0 = fake_api.add_pod("team", job_of(app_id), 0, "Running", RUNNING)
    now = time.time()
    for age in (300, 100, 50, 10):
        fake_api.logs[("team", p0)].write(f"{age}s ago\n", at=now - age)
    lines = list(k8s.log_iter(app_id, "echo", 0, since=now - 120, until=now - 30))
    assert lines == ["100s ago", "50s ago"]
    req = [r for r in fake_api.requests if r.path.endswith("/log")][-1]
    assert (
        req.query["timestamps"].lower() == "true" and 120 <= int(req.query["sinceSeconds"]) <= 130
    )


def test_logs_bad_requests(k8s: KubernetesScheduler) -> None:
    app_id = submit(k8s)
    with pytest.raises(UsageError, match="no role 'nope'; roles: echo"):
        list(k8s.log_iter(app_id, "nope", 0))
    with pytest.raises(UsageError, match="replicas 0..1, not 2"):
        k8s.log_iter(app_id, "echo", 2)
    with pytest.raises(UsageError, match="combined"):
        k8s.log_iter(app_id, "echo", 0, streams=Stream.STDERR)


def follow(k8s: KubernetesScheduler, app_id: str, out: queue.Queue[Any]) -> threading.Thread:
    """Tail replica 0 in a thread; every line, then None at the end, goes to out."""

    def run() -> None:
        try:
            for line in k8s.log_iter(app_id, "echo", 0, should_tail=True):
                out.put(line)
        except Exception as e:  # noqa: BLE001 (handed to the test thread)
            out.put(e)
        out.put(None)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_follow_streams_lines_as_they_come(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id = submit(k8s)
    job = job_of(app_id)
    p0 = fake_api.add_pod("team", job, 0, "Running", RUNNING)
    log = fake_api.logs[("team", p0)]
    log.write("before\n")
    out: queue.Queue[Any] = queue.Queue()
    t = follow(k8s, app_id, out)
    assert fake_api.follow_started.get(timeout=10) == p0
    assert out.get(timeout=10) == "before"
    log.write("step 1 lo")  # half a line: nothing yet
    log.write("ss=0.5\nstep 2 ")
    assert out.get(timeout=10) == "step 1 loss=0.5"
    assert not log.closed  # delivered while the stream is still open
    log.write("é".encode()[:1])  # a UTF-8 character split across chunks
    log.write("é".encode()[1:] + b"\n")
    assert out.get(timeout=10) == "step 2 é"
    fake_api.set_pod("team", p0, "Succeeded", {"terminated": {"exitCode": 0}})
    fake_api.set_job_status("team", job, conditions=[{"type": "Complete", "status": "True"}])
    log.write("last words")
    log.close()
    assert out.get(timeout=10) == "last words"
    assert out.get(timeout=10) is None
    t.join(timeout=10)
    req = [r for r in fake_api.requests if r.path.endswith("/log")][-1]
    assert req.query["follow"].lower() == "true"


def test_follow_survives_a_dropped_connection(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id = submit(k8s)
    p0 = fake_api.add_pod("team", job_of(app_id), 0, "Running", RUNNING)
    out: queue.Queue[Any] = queue.Queue()
    follow(k8s, app_id, out)
    assert fake_api.follow_started.get(timeout=10) == p0
    fake_api.logs[("team", p0)].write("a\npartial")
    assert out.get(timeout=10) == "a"
    fake_api.set_job_status(
        "team", job_of(app_id), conditions=[{"type": "Complete", "status": "True"}]
    )
    fake_api.logs[("team", p0)].close(drop=True)
    assert out.get(timeout=10) == "partial"
    assert out.get(timeout=10) is None  # the end, not an exception


def test_follow_waits_for_the_pod_and_for_its_retry(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id = submit(k8s)
    job = job_of(app_id)
    first = fake_api.add_pod("team", job, 0, "Pending")
    out: queue.Queue[Any] = queue.Queue()
    follow(k8s, app_id, out)
    fake_api.logs[("team", first)].write("attempt 1\n")
    fake_api.set_pod("team", first, "Running", RUNNING)  # the follower polls until it starts
    assert fake_api.follow_started.get(timeout=10) == first
    assert out.get(timeout=10) == "attempt 1"
    fake_api.set_pod("team", first, "Failed", {"terminated": {"exitCode": 1}})
    second = fake_api.add_pod("team", job, 0, "Running", RUNNING)  # the Job controller's retry
    fake_api.logs[("team", second)].write("attempt 2\n")
    fake_api.logs[("team", first)].close()
    assert fake_api.follow_started.get(timeout=10) == second
    assert out.get(timeout=10) == "attempt 2"
    fake_api.set_job_status("team", job, conditions=[{"type": "Failed", "status": "True"}])
    fake_api.logs[("team", second)].close()
    assert out.get(timeout=10) is None


def test_follow_reads_a_pod_that_started_and_ended_while_it_looked(
    k8s: KubernetesScheduler, fake_api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pod runs to its end after the follower's look for it found none and before its look
    at the app's state (a sweep point given its slot just then): `logs -f` lost its lines."""
    app_id = submit(k8s)
    job = job_of(app_id)
    terminal = LogReader._terminal

    def pod_ran_meanwhile(reader: LogReader) -> bool:  # the ordering, made explicit
        if not fake_api.names("pods", "team"):
            pod = fake_api.add_pod("team", job, 0, "Succeeded", {"terminated": {"exitCode": 0}})
            fake_api.logs[("team", pod)].write("all of it\n")
            fake_api.logs[("team", pod)].close()
            done = [{"type": "Complete", "status": "True"}]
            fake_api.set_job_status("team", job, conditions=done)
        return terminal(reader)

    monkeypatch.setattr(LogReader, "_terminal", pod_ran_meanwhile)
    assert list(k8s.log_iter(app_id, "echo", 0, should_tail=True)) == ["all of it"]


def test_unreachable_cluster(tmp_path: Path) -> None:
    dead = FakeApiServer()  # bound, then closed: nothing listens on its port
    url = dead.url
    dead._server.server_close()
    s = create_scheduler("s", kubeconfig=str(write_kubeconfig(tmp_path / "kc", url)))
    with pytest.raises(SchedulerUnavailable) as e:
        s.describe("team:x-12345")
    assert str(e.value) == f"cannot reach the Kubernetes API server at {url} (Connection refused)"
    assert "cluster-info" in (e.value.hint or "")


def test_missing_extra(monkeypatch: pytest.MonkeyPatch, kubeconfig: Path) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # as if not installed
    s = create_scheduler("s", kubeconfig=str(kubeconfig))
    with pytest.raises(SchedulerUnavailable) as e:
        s.describe("team:x-12345")
    assert str(e.value) == (
        "the kubernetes backend needs the Kubernetes client: pip install 'trainlaunch[kubernetes]'"
    )


def test_bad_kubeconfig(tmp_path: Path, kubeconfig: Path) -> None:
    with pytest.raises(UsageError, match="kube context 'nope' not found"):
        create_scheduler("s", kubeconfig=str(kubeconfig), context="nope").describe("team:x-12345")
    broken = tmp_path / "broken"
    broken.write_text(
        kubeconfig.read_text().replace("cluster: fake\n    user", "cluster: gone\n    user")
    )
    with pytest.raises(SchedulerUnavailable, match="cannot load the Kubernetes configuration"):
        create_scheduler("s", kubeconfig=str(broken)).describe("team:x-12345")
    with pytest.raises(UsageError, match="no kubeconfig"):
        create_scheduler("s", kubeconfig=str(tmp_path / "missing")).list()
    with pytest.raises(UsageError, match="unknown kubernetes scheduler parameter"):
        create_scheduler("s", cluster="x")
