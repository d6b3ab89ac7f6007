"""Rendering: golden manifests, names within limits, macros, retries and option errors."""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

import pytest
import yaml
from k8s_cases import CASES, GOLDEN_ZIPAPP, SESSION, render_case
from k8s_helpers import GOLDEN, echo_app, kubelet_expand
from k8s_schemas import assert_valid_text

from trainlaunch.errors import UsageError
from trainlaunch.schedulers.kubernetes.backend import KubernetesScheduler
from trainlaunch.schedulers.kubernetes.checks import check_manifests
from trainlaunch.schedulers.kubernetes.names import app_name
from trainlaunch.schedulers.kubernetes.options import RenderOptions
from trainlaunch.schedulers.kubernetes.pod import kube_text
from trainlaunch.schedulers.kubernetes.render import render_app, role_from_job
from trainlaunch.schedulers.kubernetes.request import to_yaml
from trainlaunch.specs import AppDef, RetryPolicy, Role


def dryrun(app: AppDef, **cfg: Any) -> Any:
    """submit_dryrun with cfg resolved the way the runner does."""
    s = KubernetesScheduler(SESSION)
    return s.submit_dryrun(app, s.run_opts().resolve({"namespace": "team", **cfg}, "kubernetes"))


def render(app: AppDef, **cfg: Any) -> list[dict[str, Any]]:
    """The manifests of app under cfg (name 'app-00000')."""
    resolved = KubernetesScheduler(SESSION).run_opts().resolve({"namespace": "team", **cfg})
    opts = RenderOptions.from_cfg(resolved, "team")
    return render_app(app, "app-00000", SESSION, opts, GOLDEN_ZIPAPP)


def container(docs: list[dict[str, Any]], i: int = 0) -> dict[str, Any]:
    """The container of the i-th Job."""
    jobs = [d for d in docs if d["kind"] == "Job"]
    return jobs[i]["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str) -> None:
    docs = render_case(case)
    text = to_yaml(docs)
    path = GOLDEN / f"{case}.yaml"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"rerun with UPDATE_GOLDEN=1 and review the diff of {path}"
    assert check_manifests(docs) == []


def test_dryrun_text_is_exactly_the_request() -> None:
    info = dryrun(echo_app(3))
    docs = assert_valid_text(str(info))  # YAML, the checks, the schemas
    assert docs == list(info.request.resources)
    assert [d["kind"] for d in docs] == ["Job", "Service"]
    assert re.fullmatch(r"team:echo-[a-z0-9]{5}", info.app_id)
    assert info.request.app_id == info.app_id


def test_dryrun_names_are_unique() -> None:
    assert len({dryrun(echo_app()).app_id for _ in range(20)}) == 20


def test_dryrun_needs_no_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # as if the extra were not installed
    assert "kind: Job" in str(dryrun(echo_app()))


def test_json_when_pyyaml_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = render(echo_app())
    monkeypatch.setitem(sys.modules, "yaml", None)
    text = to_yaml(docs)
    assert [json.loads(part) for part in text.split("---\n")[1:]] == docs
    assert list(yaml.safe_load_all(text)) == docs  # JSON is YAML too


@pytest.mark.parametrize(
    "text",
    [
        "plain",
        "$HOME",
        "${HOME}",
        "$(HOME)",
        "$$(HOME)",
        "$$",
        "cost: 5$",
        "$(",
        "$(unclosed",
        "a$$$(HOME)b",
        "$(date +%F) and $((1+2))",
        "${rank0_env} stays",
    ],
)
def test_text_survives_kubelet_expansion(text: str) -> None:
    env = {"HOME": "/root", "date +%F": "BOOM", "TRAINLAUNCH_REPLICA_ID": "3"}
    assert kubelet_expand(kube_text(text), env) == text


def test_replica_id_macro_expands_per_pod() -> None:
    app = echo_app(2, args=("--rank=${replica_id}", "$(keep)"), env={"R": "r${replica_id}"})
    c = container(render(app))
    env = {"TRAINLAUNCH_REPLICA_ID": "1"}
    assert [kubelet_expand(a, env) for a in c["args"]] == ["--rank=1", "$(keep)"]
    values = {e["name"]: e.get("value") for e in c["env"]}
    assert kubelet_expand(values["R"], env) == "r1"
    # $(VAR) only expands variables defined earlier: the replica id must come first.
    assert c["env"][0]["name"] == "TRAINLAUNCH_REPLICA_ID"
    assert c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    )


def test_app_id_and_rank0_macros() -> None:
    app = echo_app(2, args=("${app_id}", "${rank0_env}"))
    c = container(render(app))
    assert c["args"] == ["app-00000", "TRAINLAUNCH_RANK0_HOST"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["TRAINLAUNCH_RANK0_HOST"] == "app-00000-echo-0.app-00000-echo.team.svc"
    assert env["TRAINLAUNCH_APP_ID"] == "team:app-00000"
    assert env["TRAINLAUNCH_HANDLE"] == "kubernetes://tests/team:app-00000"
    assert env["TRAINLAUNCH_RDZV_PORT"] == "29500"
    assert env["TRAINLAUNCH_NUM_REPLICAS"] == "2"


def test_backend_identity_wins_over_role_env() -> None:
    app = echo_app(env={"TRAINLAUNCH_APP_ID": "spoof", "TRAINLAUNCH_REPLICA_ID": "9", "A": "1"})
    names = [e["name"] for e in container(render(app))["env"]]
    assert names.count("TRAINLAUNCH_APP_ID") == names.count("TRAINLAUNCH_REPLICA_ID") == 1
    env = {e["name"]: e.get("value") for e in container(render(app))["env"]}
    assert env["TRAINLAUNCH_APP_ID"] == "team:app-00000" and env["A"] == "1"


@pytest.mark.parametrize("name", ["x", "a" * 63, "9lives", "x___", "Mixed.Case_Name", "0_0"])
@pytest.mark.parametrize("role", ["r", "R" * 63, "a_b.c", "7", "r-"])
@pytest.mark.parametrize("replicas", [1, 10, 1000, 100_000])
def test_names_fit_every_size(name: str, role: str, replicas: int) -> None:
    app = AppDef(name, (Role(role, "true", image="busybox", num_replicas=replicas),))
    n = app_name(name, "zzzzz")
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", n) and len(n) <= 28
    docs = render_app(app, n, SESSION, RenderOptions(namespace="team"))
    assert check_manifests(docs) == []
    job = docs[0]["metadata"]["name"]
    assert len(f"{job}-{replicas - 1}") <= 63


def test_roles_that_collide_after_normalising() -> None:
    app = AppDef("a", (Role("x_y", "true", image="i"), Role("x.y", "true", image="i")))
    with pytest.raises(UsageError, match="collide"):
        render(app)


def test_retries_application_counts_a_failure_wave_per_retry() -> None:
    spec = render(echo_app(4, max_retries=2), server_version="1.28")[0]["spec"]
    assert spec["backoffLimit"] == 8 and "backoffLimitPerIndex" not in spec
    assert spec["podFailurePolicy"]["rules"][0]["action"] == "Ignore"
    assert "podReplacementPolicy" not in spec  # not in the 1.27/1.28 API


def test_retries_application_on_new_servers_also_caps_each_replica() -> None:
    spec = render(echo_app(4, max_retries=2))[0]["spec"]  # the default: 1.29
    assert spec["backoffLimit"] == 8  # the app's failures, as before
    assert (spec["backoffLimitPerIndex"], spec["maxFailedIndexes"]) == (2, 0)
    assert spec["podReplacementPolicy"] == "Failed"


def test_retries_replica_uses_per_index_limits_on_new_servers() -> None:
    app = echo_app(4, max_retries=2, retry_policy=RetryPolicy.REPLICA)
    spec = render(app, server_version="1.29")[0]["spec"]
    assert (spec["backoffLimitPerIndex"], spec["maxFailedIndexes"]) == (2, 0)
    assert "backoffLimit" not in spec and spec["podReplacementPolicy"] == "Failed"
    with pytest.raises(UsageError, match="1.29") as e:
        render(app, server_version="1.28")
    assert "server_version" in (e.value.hint or "")


def rules(spec: dict[str, Any]) -> list[tuple[str, Any]]:
    """The podFailurePolicy rules as (action, what they match)."""
    out = []
    for r in spec["podFailurePolicy"]["rules"]:
        codes = r.get("onExitCodes")
        match = codes["values"] if codes else [c["type"] for c in r["onPodConditions"]]
        out.append((r["action"], match))
    return out


def test_requeues_are_ignored_and_their_end_fails_the_job() -> None:
    spec = render(echo_app(2, max_retries=1), max_requeues=5)[0]["spec"]
    assert rules(spec) == [
        ("Ignore", ["DisruptionTarget"]),  # preemption, eviction, node drain
        ("Ignore", [75]),  # a rank saved its state and asked for a requeue
        ("FailJob", [76]),  # the agent found the replica's requeues used up
    ]
    env = {e["name"]: e for e in spec["template"]["spec"]["containers"][0]["env"]}
    paths = {
        k: env[k]["valueFrom"]["fieldRef"]["fieldPath"]
        for k in ("TRAINLAUNCH_INDEX_FAILURES", "TRAINLAUNCH_INDEX_REQUEUES")
    }
    assert paths == {
        "TRAINLAUNCH_INDEX_FAILURES": (
            "metadata.annotations['batch.kubernetes.io/job-index-failure-count']"
        ),
        "TRAINLAUNCH_INDEX_REQUEUES": (
            "metadata.annotations['batch.kubernetes.io/job-index-ignored-failure-count']"
        ),
    }
    assert env["TRAINLAUNCH_MAX_REQUEUES"]["value"] == "5"
    assert "TRAINLAUNCH_RESTART_COUNT" not in env  # the agent computes it in the pod


def test_old_servers_get_no_counts() -> None:
    spec = render(echo_app(2), server_version="1.27")[0]["spec"]
    assert rules(spec) == [("Ignore", ["DisruptionTarget"]), ("Ignore", [75])]
    names = {e["name"] for e in spec["template"]["spec"]["containers"][0]["env"]}
    assert not names & {"TRAINLAUNCH_INDEX_FAILURES", "TRAINLAUNCH_MAX_REQUEUES"}


def test_a_role_cannot_set_what_the_pod_fills_in() -> None:
    app = echo_app(2, env={"TRAINLAUNCH_INDEX_REQUEUES": "0", "TRAINLAUNCH_MAX_REQUEUES": "99"})
    env = render(app, max_requeues=1)[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env].count("TRAINLAUNCH_INDEX_REQUEUES") == 1
    assert [e for e in env if e["name"] == "TRAINLAUNCH_MAX_REQUEUES"] == [
        {"name": "TRAINLAUNCH_MAX_REQUEUES", "value": "1"}
    ]


@pytest.mark.parametrize(
    "cfg, match",
    [
        ({"labels": {"trainlaunch.io/app": "x"}}, "reserved"),
        ({"tolerations": ["gpu:Sometimes"]}, "bad toleration"),
        ({"tolerations": ["=x"]}, "bad toleration"),
        ({"image_pull_policy": "Sometimes"}, "image_pull_policy"),
        ({"server_version": "1.20"}, "older than"),
        ({"server_version": "latest"}, "server_version"),
        ({"max_requeues": -1}, "max_requeues"),
        ({"rdzv_port": 70000}, "rdzv_port"),
        ({"agent": "sidecar"}, "agent must be one of bundled, image"),
        ({"metrics_mount": "relative/dir"}, "metrics_mount"),
        ({"metrics_mount": "/opt/trainlaunch"}, "metrics_mount"),
    ],
)
def test_bad_options(cfg: dict[str, Any], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        render(echo_app(), **cfg)


@pytest.mark.parametrize(
    "app, cfg, match",
    [
        (echo_app(image=""), {}, "no image"),
        (echo_app(), {"namespace": "Team_X"}, "namespace"),
        (echo_app(), {"labels": {"team": "-bad-"}}, "label team"),
        (echo_app(), {"node_selector": {"bad key!": "x"}}, "nodeSelector key"),
        (echo_app(), {"shm_size": "lots"}, "sizeLimit|quantity"),
        (echo_app(env={"1BAD": "x"}), {}, "env name '1BAD'"),
        (echo_app(port_map={"Web_UI": 80}), {}, "port name 'Web_UI'"),
    ],
)
def test_dryrun_rejects_what_the_api_server_would(
    app: AppDef, cfg: dict[str, Any], match: str
) -> None:
    with pytest.raises(UsageError, match=match):
        dryrun(app, **cfg)


def test_tolerations_use_kubectl_taint_syntax() -> None:
    spec = render(echo_app(), tolerations=["a=b:NoSchedule", "c:NoExecute", "d=e", "f"])[0]
    assert spec["spec"]["template"]["spec"]["tolerations"] == [
        {"key": "a", "operator": "Equal", "value": "b", "effect": "NoSchedule"},
        {"key": "c", "operator": "Exists", "effect": "NoExecute"},
        {"key": "d", "operator": "Equal", "value": "e"},
        {"key": "f", "operator": "Exists"},
    ]


def test_the_job_records_its_role() -> None:
    app = CASES["ddp_all_options"][0]
    jobs = [d for d in render_case("ddp_all_options") if d["kind"] == "Job"]
    assert [role_from_job(j) for j in jobs] == list(app.roles)


def test_the_image_interpreter_spellings() -> None:
    from k8s_cases import stock_ddp_app

    app = stock_ddp_app()
    default = container(render(app, agent="image"))
    assert default["command"][:2] == ["sh", "-c"] and default["command"][3] == "python"
    assert default["args"][:2] == ["-m", "trainlaunch.agent"]
    assert container(render(app, agent="image", python="python3"))["command"] == ["python3"]
    assert container(render(app, python="python"))["command"] == ["python"]
    assert container(render(app, python="python"))["args"][0] == "/opt/trainlaunch/agent.pyz"
    # a component's own choice (dist.ddp --python) is the image's path: kept as given
    chosen = stock_ddp_app(python="/opt/conda/bin/python3")
    assert container(render(chosen, python="python"))["command"] == ["/opt/conda/bin/python3"]


def test_roles_not_running_the_agent_get_no_configmap() -> None:
    docs = render(echo_app())
    assert [d["kind"] for d in docs] == ["Job", "Service"]
    assert [v["name"] for v in docs[0]["spec"]["template"]["spec"]["volumes"]] == ["dshm"]
