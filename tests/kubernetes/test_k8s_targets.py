"""`--cfg api=jobset|trainjob`: the JobSet and the TrainJob, their schemas (vendored CRDs),
the env contract they share with the Job target, what each refuses, and how they read back."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from k8s_cases import ALL_OPTIONS, ddp_app, long_app, stock_ddp_app
from k8s_fake_apiserver import FakeApiServer
from k8s_helpers import cli, echo_app, write_kubeconfig
from k8s_schemas import assert_valid, schema_errors

from trainlaunch import settings
from trainlaunch.errors import SchedulerError, UsageError
from trainlaunch.schedulers.kubernetes import status as st
from trainlaunch.schedulers.kubernetes.backend import KubernetesScheduler, create_scheduler
from trainlaunch.schedulers.kubernetes.checks import check_manifests
from trainlaunch.schedulers.kubernetes.names import app_name
from trainlaunch.schedulers.kubernetes.options import RenderOptions
from trainlaunch.schedulers.kubernetes.render import render_app
from trainlaunch.schedulers.kubernetes.targets import role_views
from trainlaunch.schedulers.kubernetes.trainjob import runtime_manifest
from trainlaunch.specs import AppDef, AppState, RetryPolicy

ZIPAPP = b"agent"


def render(app: AppDef, **cfg: Any) -> list[dict[str, Any]]:
    resolved = KubernetesScheduler("s").run_opts().resolve({"namespace": "team", **cfg})
    opts = RenderOptions.from_cfg(resolved, str(resolved.get("namespace") or "team"))
    return render_app(app, app_name(app.name, "abcde"), "s", opts, ZIPAPP)


def env(view: dict[str, Any]) -> dict[str, Any]:
    c = view["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


def test_jobset_has_a_replicated_job_per_role_and_jobsets_policies() -> None:
    docs = render(ddp_app(), api="jobset")  # 4 trainers (REPLICA retries), 1 parameter server
    assert [d["kind"] for d in docs] == ["JobSet"]  # JobSet makes the headless Service
    (js,) = docs
    spec = js["spec"]
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert spec["successPolicy"] == {"operator": "All"}  # every role completes
    # the parameter server retries as a whole (2); the trainers per replica, in their Job
    assert spec["failurePolicy"]["maxRestarts"] == 2
    assert spec["failurePolicy"]["rules"][0]["action"] == "FailJobSet"
    trainer, ps = spec["replicatedJobs"]
    assert (trainer["name"], trainer["replicas"], ps["name"]) == ("trainer", 1, "param-server")
    assert trainer["template"]["spec"]["backoffLimitPerIndex"] == 3  # REPLICA: its own
    assert ps["template"]["spec"]["backoffLimit"] == 0  # a failure restarts the JobSet
    assert "labels" not in trainer["template"].get("metadata", {})  # the JobSet is the app
    views = role_views(js)
    assert [v["metadata"]["name"] for v in views] == [
        "ddp-train-abcde-trainer-0",
        "ddp-train-abcde-param-server-0",
    ]
    ns = "team"
    assert (
        env(views[0])[settings.RANK0_HOST]
        == f"ddp-train-abcde-trainer-0-0.ddp-train-abcde.{ns}.svc"
    )
    failures = {
        v["metadata"]["name"]: env(v)[settings.INDEX_FAILURES]["fieldRef"]["fieldPath"]
        for v in views
    }
    assert failures == {
        "ddp-train-abcde-trainer-0": "metadata.annotations['batch.kubernetes.io/job-index-failure-count']",
        "ddp-train-abcde-param-server-0": "metadata.annotations['jobset.sigs.k8s.io/restart-attempt']",
    }
    assert_valid(docs)


@pytest.mark.parametrize("api", ["jobset", "trainjob"])
def test_the_env_contract_is_the_job_targets(api: str) -> None:
    rs = settings.RankSettings(seed=7, metrics_path="/tmp/trainlaunch/metrics/")
    app = settings.inject(stock_ddp_app(), rs, "kubernetes://s/")
    job = role_views(render(app)[0])[0]
    other = role_views(render(app, api=api)[0])[0]
    a, b = env(job), env(other)
    assert a.keys() == b.keys()
    differ = {k for k in a if a[k] != b[k]}  # where rank 0 is, and who counts failures
    assert differ == {settings.RANK0_HOST, settings.INDEX_FAILURES}
    assert (
        a[settings.SEED] == b[settings.SEED]
        and a[settings.METRICS_PATH] == b[settings.METRICS_PATH]
    )


def test_trainjob_carries_the_role_as_its_trainer() -> None:
    (tj, cm) = render(stock_ddp_app(), api="trainjob", runtime="trainlaunch")
    assert cm["kind"] == "ConfigMap"
    spec = tj["spec"]
    assert spec["runtimeRef"] == {
        "name": "trainlaunch",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    assert spec["trainer"]["numNodes"] == 2 and spec["trainer"]["image"].startswith("pytorch/")
    (patch,) = spec["runtimePatches"]
    assert patch["manager"] == "trainlaunch.io/trainlaunch"
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]
    assert pod["metadata"]["labels"]["trainlaunch.io/app"] == "train-abcde"
    assert {v["name"] for v in pod["spec"]["volumes"]} == {"dshm", "trainlaunch-agent"}
    view = role_views(tj)[0]
    assert view["metadata"]["name"] == "train-abcde-node-0"
    assert env(view)[settings.RANK0_HOST] == "train-abcde-node-0-0.train-abcde.team.svc"
    assert_valid([tj, cm])
    assert (
        render(stock_ddp_app(), api="trainjob")[0]["spec"]["runtimeRef"]["name"]
        == "torch-distributed"
    )


@pytest.mark.parametrize(
    "app, cfg, why",
    [
        (ddp_app(), {}, "a TrainJob has one trainer, and app 'DDP.Train' has 2 roles"),
        (echo_app(2, max_retries=2), {}, "max_retries=2, but a TrainJob's retries are"),
        (
            echo_app(2),
            {"priority_class": "high"},
            "--cfg priority_class is the ClusterTrainingRuntime's",
        ),
        (echo_app(2), {"image_pull_policy": "Always"}, "--cfg image_pull_policy is"),
        (echo_app(2, env={"PET_NNODES": "3"}), {}, "Trainer sets PET_NNODES itself"),
    ],
)
def test_what_a_trainjob_cannot_carry_is_refused(
    app: AppDef, cfg: dict[str, Any], why: str
) -> None:
    with pytest.raises(UsageError, match="cannot run .* as a TrainJob") as e:
        render(app, api="trainjob", **cfg)
    assert why in str(e.value) and "api=jobset" in (e.value.hint or "")


@pytest.mark.parametrize("api", ["jobset", "trainjob"])
def test_every_option_renders_valid_objects(api: str) -> None:
    cfg = {**ALL_OPTIONS, "api": api, "queue": "team-queue", "metrics_pvc": "m"}
    app = ddp_app()
    if api == "trainjob":
        cfg = {k: v for k, v in cfg.items() if k not in ("priority_class", "image_pull_policy")}
        app = AppDef("one", (app.roles[1].replace(max_retries=0),))
    docs = render(app, **cfg)
    assert check_manifests(docs) == []
    assert_valid(docs, (1, 33))


def test_names_fit_what_the_jobset_webhook_checks() -> None:
    # 1000 replicas and a 63-character role: <jobset>-<role>-0-999-<5 random> stays <= 63
    (js,) = render(long_app(), api="jobset")
    rj = js["spec"]["replicatedJobs"][0]
    longest = f"{js['metadata']['name']}-{rj['name']}-0-999-abcde"
    assert len(longest) == 63 and check_manifests([js]) == []
    broken = copy.deepcopy(js)
    broken["spec"]["replicatedJobs"][0]["name"] += "x"
    assert any("would exceed 63 characters" in p for p in check_manifests([broken]))


@pytest.mark.parametrize(
    "kind, path, value, expect",
    [
        ("JobSet", ("spec", "replicatedJobs", 0, "replicas"), "two", "'two' is not of type"),
        ("JobSet", ("spec", "sucessPolicy"), {}, "'sucessPolicy' was unexpected"),
        ("TrainJob", ("spec", "trainer", "numNodes"), "2", "'2' is not of type"),
        ("TrainJob", ("spec", "trainer", "imagee"), "x", "'imagee' was unexpected"),
    ],
)
def test_the_crd_schemas_catch_mistakes(
    kind: str, path: tuple[Any, ...], value: Any, expect: str
) -> None:
    doc = copy.deepcopy(render(echo_app(2), api=kind.lower())[0])
    assert schema_errors(doc) == []
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert any(expect in e for e in schema_errors(doc)), schema_errors(doc)


def test_the_recommended_runtime_is_valid() -> None:
    assert schema_errors(runtime_manifest()) == []
    node = runtime_manifest()["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert node["podFailurePolicy"]["rules"][1]["onExitCodes"]["values"] == [75]
    assert node["template"]["spec"]["restartPolicy"] == "Never"


@pytest.mark.parametrize(
    "cfg, error",
    [
        ({"api": "volcano"}, "api must be one of job, jobset, trainjob"),
        ({"queue": "Team_Queue"}, "queue must be a Kueue LocalQueue name"),
        ({"runtime": "No Such"}, "runtime must be a ClusterTrainingRuntime name"),
    ],
)
def test_bad_options_are_usage_errors(cfg: dict[str, Any], error: str) -> None:
    with pytest.raises(UsageError, match=error):
        render(echo_app(), **cfg)


def test_runopts_document_each_target_option() -> None:
    opts = dict(KubernetesScheduler("s").run_opts())
    assert (
        opts["api"].default == "job"
        and "jobset" in opts["api"].help
        and "trainjob" in opts["api"].help
    )
    assert "kueue.x-k8s.io/queue-name" in opts["queue"].help
    assert opts["runtime"].default == "torch-distributed"


def _jobset_status(**status: Any) -> dict[str, Any]:
    (js,) = render(echo_app(2), api="jobset")
    js["status"] = status
    return js


def _pod(job: str, index: int, code: int) -> dict[str, Any]:
    phase = "Succeeded" if code == 0 else "Failed"
    return {
        "metadata": {
            "name": f"{job}-{index}-xyz",
            "labels": {"trainlaunch.io/role": "echo"},
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
            "creationTimestamp": "2030-01-01T00:00:00Z",
        },
        "spec": {"containers": [{"name": "echo"}]},
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": "echo", "state": {"terminated": {"exitCode": code}}}],
        },
    }


def test_a_jobsets_verdict_maps_like_a_jobs() -> None:
    def status(js: dict[str, Any], pods: list[dict[str, Any]] | None = None) -> Any:
        return st.app_status(role_views(js), pods or [])

    done = _jobset_status(
        conditions=[{"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}]
    )
    assert status(done).state == AppState.SUCCEEDED
    held = _jobset_status(
        conditions=[{"type": "Suspended", "status": "True", "reason": "JobSetSuspended"}]
    )
    assert status(held).state == AppState.PENDING
    restarted = _jobset_status(restarts=2, conditions=[])
    assert status(restarted).num_restarts == 2
    # the requeue rule failed it: a pod out of requeues exited 76
    out = _jobset_status(
        conditions=[
            {
                "type": "Failed",
                "status": "True",
                "reason": "FailJobSetFailurePolicyAction",
                "message": "applying FailJobSet failure policy action (first failed job: echo-abcde-echo-0)",
            }
        ]
    )
    s = status(out, [_pod("echo-abcde-echo-0", 0, 0), _pod("echo-abcde-echo-0", 1, 76)])
    assert s.state == AppState.FAILED and s.exit_code == 76
    assert s.msg.startswith("requeues exhausted: a replica was preempted or asked for a requeue")


def test_a_trainjobs_verdict_maps_like_a_jobs() -> None:
    (tj,) = render(echo_app(2), api="trainjob")
    for condition, state in [
        ("Complete", AppState.SUCCEEDED),
        ("Failed", AppState.FAILED),
        ("Suspended", AppState.PENDING),
    ]:
        tj["status"] = {
            "conditions": [{"type": condition, "status": "True", "reason": "x", "message": "m"}]
        }
        assert st.app_status(role_views(tj), []).state == state


def test_on_a_cluster_without_the_crds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    plain = FakeApiServer().start()  # no JobSet, no Trainer: their APIs answer 404
    try:
        s = create_scheduler("s", kubeconfig=str(write_kubeconfig(tmp_path / "kc", plain.url)))
        info = s.submit_dryrun(echo_app(2), s.run_opts().resolve({"api": "jobset"}, "k8s"))
        with pytest.raises(
            SchedulerError, match="does not serve jobsets.jobset.x-k8s.io/v1alpha2"
        ) as e:
            s.schedule(info)
        assert "install the JobSet controller" in (e.value.hint or "")
        job_app = s.schedule(s.submit_dryrun(echo_app(2), s.run_opts().resolve({}, "k8s")))
        assert s.describe(job_app).state == AppState.PENDING  # Job apps need no CRD
        assert [r.app_id for r in s.list()] == [job_app]
        s.close()
    finally:
        plain.stop()


def test_listing_jobsets_forbidden_does_not_break_job_apps(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    app_id = k8s.schedule(k8s.submit_dryrun(echo_app(1), k8s.run_opts().resolve({}, "k8s")))
    fake_api.fail("GET", r"/jobsets$", 403, "Forbidden", "jobsets.jobset.x-k8s.io is forbidden")
    assert [r.app_id for r in k8s.list()] == [app_id]
    fake_api.fail("GET", r"/jobsets$", 403, "Forbidden", "jobsets.jobset.x-k8s.io is forbidden")
    from trainlaunch.errors import AppNotFound

    with pytest.raises(AppNotFound, match=r"not searched: jobsets, forbidden by RBAC"):
        k8s.describe("team:nope-12345")


def test_max_parallel_is_the_job_targets(tmp_path: Path) -> None:
    out = cli(tmp_path, "sweep", "-s", "k8s", "--cfg", "api=jobset", "--max-parallel", "2",
              "--param", "x=1,2", "--dryrun", "utils.sh", "--image", "b", "echo {x}")  # fmt: skip
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "runs the points as one Indexed Job (api=job); a JobSet has no such limit" in out.stderr


def test_retry_policies_of_a_jobset() -> None:
    app = echo_app(2, max_retries=4, retry_policy=RetryPolicy.ROLE)
    (js,) = render(app, api="jobset")
    assert js["spec"]["failurePolicy"]["maxRestarts"] == 4
    job = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (job["backoffLimit"], job["backoffLimitPerIndex"], job["maxFailedIndexes"]) == (0, 0, 0)


def test_a_sweep_of_jobsets_runs_and_stops(
    kubeconfig: Path, fake_api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --max-parallel a sweep is one app per point, on any target."""
    from k8s_kubelet import FakeKubelet

    from tests.conftest import wait_until
    from trainlaunch.runner import get_runner
    from trainlaunch.settings import RankSettings
    from trainlaunch.sweeps import grammar as sweeps
    from trainlaunch.sweeps import runs as sweep_runs

    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    points = sweeps.expand([sweeps.parse_param("x=1,2")], (1,))
    cfg = {"kubeconfig": str(kubeconfig), "api": "jobset"}
    kubelet = FakeKubelet(fake_api).start()
    try:
        with get_runner("s", kubeconfig=str(kubeconfig)) as runner:
            args = ["--image", "busybox", "echo x={x}"]
            plan = sweep_runs.plan_sweep(
                runner, "utils.sh", args, points, "kubernetes", cfg, RankSettings()
            )
            assert plan.array is None and len(plan.infos) == 2
            sweep_runs.launch(runner, plan)
            handles = [r["handle"] for r in sweep_runs.read_sweep(plan.sweep_id)["points"]]
            wait_until(
                lambda: [runner.status(h).state for h in handles] == [AppState.SUCCEEDED] * 2,
                timeout=60,
                what="both points to succeed",
            )
            assert [list(runner.log_lines(h, "sh", 0)) for h in handles] == [["x=1"], ["x=2"]]
            runner.cancel_many(handles)
            assert fake_api.names("jobsets", "team") == [] and fake_api.names("pods", "team") == []
    finally:
        kubelet.stop()


def test_follow_waits_for_a_jobsets_pod_and_ends_with_the_jobset(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    """`logs -f` of a JobSet app: its pods come later (JobSet's child Job), it ends with it."""
    import queue
    import threading

    from k8s_controllers import jobset_children

    app_id = k8s.schedule(
        k8s.submit_dryrun(echo_app(1), k8s.run_opts().resolve({"api": "jobset"}, "k8s"))
    )
    out: queue.Queue[Any] = queue.Queue()

    def run() -> None:
        for line in k8s.log_iter(app_id, "echo", 0, should_tail=True):
            out.put(line)
        out.put(None)

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    from tests.conftest import wait_until

    def looked_for_pods() -> bool:
        return any(r.path.endswith("/pods") for r in list(fake_api.requests))

    wait_until(looked_for_pods, timeout=10, what="the follower to look for the pod")
    assert out.empty()  # still waiting: the JobSet has not ended
    name = app_id.split(":")[1]
    (job,), _ = jobset_children(fake_api.get("jobsets", "team", name) or {})
    fake_api.put("jobs", job)  # what the JobSet controller does, a moment later
    pod = fake_api.add_pod("team", job["metadata"]["name"], 0, "Running", {"running": {}})
    fake_api.logs[("team", pod)].write("hello\n")
    assert out.get(timeout=10) == "hello"
    fake_api.set_pod("team", pod, "Succeeded", {"terminated": {"exitCode": 0}})
    done = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}
    fake_api.set_status("jobsets", "team", name, {"conditions": [done], "restarts": 0})
    fake_api.logs[("team", pod)].close()
    assert out.get(timeout=10) is None
    reader.join(timeout=10)
