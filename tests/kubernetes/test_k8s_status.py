"""Status mapping from Job and pod JSON (shaped like ``kubectl get -o json``) to AppStatus."""

from __future__ import annotations

from typing import Any

from trainlaunch.schedulers.kubernetes.status import (
    JOB_CONDITION_STATE,
    POD_PHASE_STATE,
    app_status,
    combine,
    list_state,
)
from trainlaunch.specs import AppState

UNSCHEDULABLE = (
    "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes "
    "are available: 3 No preemption victims found for incoming pod."
)


def job(
    role: str = "trainer",
    n: int = 2,
    conditions: list[dict[str, Any]] | None = None,
    index: int = 0,
    **status: Any,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"app-00000-{role}",
            "creationTimestamp": "2030-01-01T00:00:00Z",
            "labels": {"trainlaunch.io/app": "app-00000", "trainlaunch.io/role": role},
            "annotations": {
                "trainlaunch.io/role-name": role,
                "trainlaunch.io/role-index": str(index),
            },
        },
        "spec": {"completions": n, "parallelism": n, "completionMode": "Indexed"},
        "status": {"conditions": conditions or [], **status},
    }


def cond(kind: str, reason: str = "", message: str = "", status: str = "True") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": "2030-01-01T00:05:00Z",
        "lastTransitionTime": "2030-01-01T00:05:00Z",
    }


def pod(
    index: int,
    phase: str,
    role: str = "trainer",
    created: str = "2030-01-01T00:00:01Z",
    name: str | None = None,
    state: dict[str, Any] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    **status: Any,
) -> dict[str, Any]:
    job_name = f"app-00000-{role}"
    s: dict[str, Any] = {"phase": phase, "conditions": conditions or [], **status}
    if state is not None:
        s["containerStatuses"] = [
            {
                "name": role,
                "state": state,
                "ready": phase == "Running",
                "restartCount": 0,
                "image": "i",
                "imageID": "",
            }
        ]
    return {
        "metadata": {
            "name": name or f"{job_name}-{index}-abcde",
            "creationTimestamp": created,
            "labels": {"trainlaunch.io/app": "app-00000", "trainlaunch.io/role": role},
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        },
        "spec": {"hostname": f"{job_name}-{index}", "subdomain": job_name},
        "status": s,
    }


RUNNING = {"running": {"startedAt": "2030-01-01T00:00:05Z"}}


def terminated(code: int, reason: str = "Error", message: str | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {
        "exitCode": code,
        "reason": reason,
        "startedAt": "2030-01-01T00:00:05Z",
        "finishedAt": "2030-01-01T00:01:00Z",
        "containerID": "containerd://x",
    }
    if message:
        t["message"] = message
    return {"terminated": t}


def test_no_pods_yet_is_pending_and_says_so() -> None:
    s = app_status([job()], [])
    assert s.state == AppState.PENDING
    assert s.msg == "2/2 replicas pending; replica 0: no pod yet"


def test_unschedulable_is_named() -> None:
    unsched = [cond("PodScheduled", "Unschedulable", UNSCHEDULABLE, status="False")]
    s = app_status(
        [job()], [pod(0, "Pending", conditions=unsched), pod(1, "Pending", conditions=unsched)]
    )
    assert s.state == AppState.PENDING
    assert s.msg == f"2/2 replicas pending; replica 0: Unschedulable: {UNSCHEDULABLE}"


def test_image_pull_errors_are_preferred_over_ordinary_waiting() -> None:
    creating = {"waiting": {"reason": "ContainerCreating"}}
    backoff = {
        "waiting": {
            "reason": "ImagePullBackOff",
            "message": 'Back-off pulling image "ghcr.io/acme/nope:1"',
        }
    }
    s = app_status([job()], [pod(0, "Pending", state=creating), pod(1, "Pending", state=backoff)])
    assert s.state == AppState.PENDING
    assert s.msg.endswith(
        'replica 1: ImagePullBackOff: Back-off pulling image "ghcr.io/acme/nope:1"'
    )
    assert [r.message for r in s.roles[0].replicas] == [
        "ContainerCreating",
        'ImagePullBackOff: Back-off pulling image "ghcr.io/acme/nope:1"',
    ]


def test_running_when_any_replica_runs() -> None:
    s = app_status([job(active=2, ready=1)], [pod(0, "Running", state=RUNNING), pod(1, "Pending")])
    assert s.state == AppState.RUNNING
    r0, r1 = s.roles[0].replicas
    assert (r0.state, r0.hostname) == (AppState.RUNNING, "app-00000-trainer-0.app-00000-trainer")
    assert r1.state == AppState.PENDING


def test_succeeded_needs_the_jobs_verdict() -> None:
    pods = [
        pod(0, "Succeeded", state=terminated(0, "Completed")),
        pod(1, "Succeeded", state=terminated(0, "Completed")),
    ]
    assert app_status([job()], pods).state == AppState.RUNNING  # controller not caught up yet
    done = job(
        conditions=[
            cond("SuccessCriteriaMet", "CompletionsReached"),
            cond("Complete", "CompletionsReached", "Reached expected number of succeeded pods"),
        ]
    )
    s = app_status([done], pods)
    assert s.state == AppState.SUCCEEDED and s.exit_code == 0  # as on every backend
    assert [r.exit_code for r in s.roles[0].replicas] == [0, 0]


def test_failed_reports_the_reason_and_the_exit_code() -> None:
    failed = job(
        conditions=[
            cond(
                "FailureTarget",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ),
            cond("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
        ],
        failed=1,
    )
    pods = [
        pod(0, "Running", state=RUNNING),
        pod(1, "Failed", state=terminated(3, message="ValueError: bad lr")),
    ]
    s = app_status([failed], pods)
    assert s.state == AppState.FAILED and s.exit_code == 3 and s.num_restarts == 1
    assert s.msg == (
        "BackoffLimitExceeded: Job has reached the specified backoff limit; "
        "replica 1 exited with code 3 (ValueError: bad lr)"
    )


def test_failure_target_is_already_failed() -> None:
    # Pods still terminate after FailureTarget; the verdict is final already.
    j = job(
        conditions=[
            cond(
                "FailureTarget",
                "PodFailurePolicy",
                "Container trainer for pod team/x failed with exit code 42 matching FailJob rule at index 0",
            )
        ]
    )
    assert app_status([j], [pod(0, "Failed", state=terminated(42))]).state == AppState.FAILED


def test_oom_and_eviction_messages() -> None:
    j = job(n=2, conditions=[cond("Failed", "BackoffLimitExceeded")])
    pods = [
        pod(0, "Failed", state=terminated(137, "OOMKilled")),
        pod(1, "Failed", reason="Evicted", message="The node was low on resource: memory."),
    ]
    r0, r1 = app_status([j], pods).roles[0].replicas
    assert (r0.exit_code, r0.message) == (137, "OOMKilled")
    assert r1.message == "Evicted: The node was low on resource: memory."


def test_the_newest_pod_of_an_index_is_the_replica() -> None:
    pods = [
        pod(0, "Failed", state=terminated(1), created="2030-01-01T00:00:01Z", name="a-0-old"),
        pod(0, "Running", state=RUNNING, created="2030-01-01T00:02:00Z", name="a-0-new"),
    ]
    r0 = app_status([job(n=1, failed=1)], pods).roles[0].replicas[0]
    assert (r0.state, r0.restarts) == (AppState.RUNNING, 1)


def test_a_failed_replica_awaiting_its_retry() -> None:
    pods = [
        pod(0, "Failed", state=terminated(1)),
        pod(1, "Succeeded", state=terminated(0, "Completed")),
    ]
    s = app_status([job(failed=1)], pods)
    assert s.state == AppState.PENDING
    assert s.msg == "replica 0 exited with code 1 (Error); waiting for its retry"


def test_a_sidecars_status_is_not_the_replicas() -> None:
    p = pod(0, "Running", state=RUNNING)
    p["spec"]["containers"] = [{"name": "trainer"}, {"name": "istio-proxy"}]
    p["status"]["containerStatuses"].insert(0, {"name": "istio-proxy", "state": terminated(0)})
    assert app_status([job(n=1)], [p]).roles[0].replicas[0].exit_code is None


def test_suspended_is_pending() -> None:
    j = job(conditions=[cond("Suspended", "JobSuspended", "Job suspended")])
    s = app_status([j], [])
    assert s.state == AppState.PENDING and "JobSuspended" in s.msg


def test_a_job_being_deleted_is_cancelled() -> None:
    j = job()
    j["metadata"]["deletionTimestamp"] = "2030-01-01T00:09:00Z"
    assert app_status([j], [pod(0, "Running", state=RUNNING)]).state == AppState.CANCELLED


def test_unknown_values_map_to_unknown_not_a_crash() -> None:
    j = job(n=1, conditions=[cond("SomethingNew", "X"), cond("Complete", status="False")])
    s = app_status([j], [pod(0, "Hibernating", state={"paused": {}})])
    assert s.state == AppState.UNKNOWN
    assert s.roles[0].replicas[0].state == AppState.UNKNOWN
    assert (
        app_status([job(n=1)], [pod(0, "Pending", name="x")] + [{"metadata": {}}]).state
        == AppState.PENDING
    )


def test_roles_combine_into_the_app_state() -> None:
    trainer = job("trainer", conditions=[cond("Complete")])
    ps = job("ps", n=1, index=1)
    s = app_status([ps, trainer], [pod(0, "Running", role="ps", state=RUNNING)])
    assert [r.role for r in s.roles] == ["trainer", "ps"]  # AppDef order, not API order
    assert s.state == AppState.RUNNING
    assert combine([AppState.SUCCEEDED, AppState.FAILED]) == AppState.FAILED
    assert combine([AppState.SUCCEEDED, AppState.SUCCEEDED]) == AppState.SUCCEEDED
    assert combine([AppState.SUCCEEDED, AppState.PENDING]) == AppState.PENDING
    assert combine([AppState.PENDING, AppState.UNKNOWN]) == AppState.UNKNOWN


def test_list_state_reads_only_the_job() -> None:
    assert list_state(job()) == AppState.PENDING
    assert list_state(job(ready=1, active=2)) == AppState.RUNNING
    assert list_state(job(conditions=[cond("Failed")])) == AppState.FAILED


def test_every_documented_value_is_mapped() -> None:
    # batch/v1 JobConditionType and core/v1 PodPhase, as of Kubernetes 1.37.
    assert set(JOB_CONDITION_STATE) == {
        "Suspended",
        "Complete",
        "Failed",
        "FailureTarget",
        "SuccessCriteriaMet",
    }
    assert set(POD_PHASE_STATE) == {"Pending", "Running", "Succeeded", "Failed", "Unknown"}
