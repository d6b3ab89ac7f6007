"""Requeues on Kubernetes in `status`: the count, the history and "requeues exhausted".

Pods and Jobs are JSON shaped like ``kubectl get -o json`` of an Indexed Job with
backoffLimitPerIndex, whose pods carry the controller's per-index count annotations; the last
test reads them through the real client from the fake API server.
"""

from __future__ import annotations

from typing import Any

from k8s_fake_apiserver import FakeApiServer
from k8s_helpers import echo_app
from test_k8s_status import cond, job, pod, terminated

from trainlaunch.schedulers.kubernetes.backend import KubernetesScheduler
from trainlaunch.schedulers.kubernetes.status import app_status
from trainlaunch.specs import AppState, Attempt

FAILURES = "batch.kubernetes.io/job-index-failure-count"
REQUEUES = "batch.kubernetes.io/job-index-ignored-failure-count"
PREEMPTED = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "PreemptionByScheduler",
    "message": "Kubernetes Scheduler: preempting to accommodate a higher priority pod",
}


def attempt_pod(
    index: int, failures: int, requeues: int, phase: str, code: int | None, start: str, **kw: Any
) -> dict[str, Any]:
    """A pod of `index` with the controller's counts, started at `start` (HH:MM)."""
    state = {"running": {"startedAt": f"2030-01-01T{start}:00Z"}}
    if code is not None:
        state = terminated(code)
        state["terminated"]["finishedAt"] = f"2030-01-01T{start[:3]}59:00Z"
    p = pod(
        index,
        phase,
        name=f"app-00000-trainer-{index}-{failures}{requeues}",
        created=f"2030-01-01T{start}:00Z",
        state=state,
        startTime=f"2030-01-01T{start}:00Z",
        **kw,
    )
    p["metadata"]["annotations"][FAILURES] = str(failures)
    if requeues:  # absent when 0, as the controller writes it
        p["metadata"]["annotations"][REQUEUES] = str(requeues)
    return p


def test_a_preempted_then_requeued_app_shows_its_history() -> None:
    pods = [
        # attempt 0: replica 0 preempted, replica 1's rank saved and exited 75
        attempt_pod(0, 0, 0, "Failed", 143, "00:00", conditions=[PREEMPTED]),
        attempt_pod(1, 0, 0, "Failed", 75, "00:00"),
        # attempt 1: both exited 75 (saved on a time limit)
        attempt_pod(0, 0, 1, "Failed", 75, "01:00"),
        attempt_pod(1, 0, 1, "Failed", 75, "01:00"),
        # attempt 2: running
        attempt_pod(0, 0, 2, "Running", None, "02:00"),
        attempt_pod(1, 0, 2, "Running", None, "02:00"),
    ]
    s = app_status([job(active=2)], pods)
    assert s.state == AppState.RUNNING and s.num_requeues == 2 and s.num_restarts == 0
    assert [(a.attempt, a.reason, a.exit_code) for a in s.attempts] == [
        (0, "preempted (PreemptionByScheduler; requeued)", 143),
        (1, "requeue requested (exit 75)", 75),
        (2, "", None),
    ]
    first = s.attempts[0]
    assert first.start is not None and first.end is not None and first.end > first.start
    assert s.attempts[2].end is None


def test_requeues_exhausted_says_so() -> None:
    failed_job = job(
        conditions=[
            cond(
                "Failed",
                "PodFailurePolicy",
                "Container trainer for pod team/app-00000-trainer-0-04 failed with exit code 76 "
                "matching FailJob rule at index 2",
            )
        ],
    )
    failed_job["spec"]["template"] = {
        "spec": {"containers": [{"env": [{"name": "TRAINLAUNCH_MAX_REQUEUES", "value": "3"}]}]}
    }
    pods = [
        attempt_pod(0, 0, 3, "Failed", 75, "03:00"),
        attempt_pod(0, 0, 4, "Failed", 76, "04:00"),
        attempt_pod(1, 0, 4, "Failed", 76, "04:00"),
    ]
    s = app_status([failed_job], pods)
    assert s.state == AppState.FAILED and s.exit_code == 76
    assert s.msg.startswith(
        "requeues exhausted: a replica was preempted or asked for a requeue more than "
        "max_requeues=3 times (PodFailurePolicy: Container trainer"
    )
    assert s.attempts[-1] == Attempt(
        attempt=4,
        reason="requeues exhausted (exit 76)",
        start=s.attempts[-1].start,
        end=s.attempts[-1].end,
        exit_code=76,
    )


def test_another_failjob_code_is_left_as_the_controller_says() -> None:
    message = "Container c for pod ns/p failed with exit code 42 matching FailJob rule at index 0"
    s = app_status([job(conditions=[cond("Failed", "PodFailurePolicy", message)])], [])
    assert s.msg == f"PodFailurePolicy: {message}"


def test_pods_without_counts_give_no_history() -> None:
    pods = [pod(0, "Running"), attempt_pod(1, 0, 1, "Running", None, "01:00")]
    s = app_status([job()], pods)
    assert s.attempts == () and s.num_requeues == 1


def test_status_over_the_wire_reads_the_counts_and_the_failjob(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    # The real client against the fake API server: the fake controller annotates the pods of
    # the submitted per-index Job (server_version 1.29, the default) as the real one does.
    info = k8s.submit_dryrun(echo_app(2), k8s.run_opts().resolve({"max_requeues": 1}, "k8s"))
    app_id = k8s.schedule(info)
    job_name = f"{app_id.split(':')[1]}-echo"
    saved = {"terminated": {"exitCode": 75, "reason": "Error"}}
    exhausted = {"terminated": {"exitCode": 76, "reason": "Error"}}
    for index in (0, 1):
        first = fake_api.add_pod("team", job_name, index, suffix=f"a{index}")
        fake_api.set_pod("team", first, "Failed", saved)
        second = fake_api.add_pod("team", job_name, index, suffix=f"b{index}", counts=(0, 1))
        fake_api.set_pod("team", second, "Failed", saved)
    last = fake_api.add_pod("team", job_name, 0, suffix="c0", counts=(0, 2))
    fake_api.set_pod("team", last, "Failed", exhausted)
    message = (
        f"Container echo for pod team/{last} failed with exit code 76 matching FailJob rule "
        "at index 2"
    )
    fake_api.set_job_status(
        "team",
        job_name,
        conditions=[
            {"type": "Failed", "status": "True", "reason": "PodFailurePolicy", "message": message}
        ],
    )
    s = k8s.describe(app_id).status
    assert (s.state, s.exit_code, s.num_requeues) == (AppState.FAILED, 76, 2)
    assert s.msg.startswith(
        "requeues exhausted: a replica was preempted or asked for a requeue more than "
        f"max_requeues=1 times (PodFailurePolicy: {message})"
    )
    assert [(a.attempt, a.reason) for a in s.attempts] == [
        (0, "requeue requested (exit 75)"),
        (1, "requeue requested (exit 75)"),
        (2, "requeues exhausted (exit 76)"),
    ]
