"""Every rendered manifest against the real Kubernetes OpenAPI schemas (strict: unknown fields fail).

The schemas are the ones ``kubernetes-validate`` ships (1.25 .. 1.37). A manifest rendered for
``server_version`` V must be valid on V and on every newer version up to the newest; the
supported range is 1.27 (oldest) .. 1.37 (newest).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from k8s_cases import CASES, render_case
from k8s_helpers import echo_app
from k8s_schemas import SCHEMAS, schema_errors
from k8s_schemas import assert_valid as assert_valid_from

from trainlaunch.schedulers.kubernetes.backend import KubernetesScheduler
from trainlaunch.schedulers.kubernetes.options import NEWEST_VERSION, OLDEST_VERSION, RenderOptions
from trainlaunch.schedulers.kubernetes.render import render_app
from trainlaunch.specs import AppDef, RetryPolicy, Role
from trainlaunch.specs import Resource as TlResource


def test_the_schemas_cover_the_supported_range() -> None:
    for version in (OLDEST_VERSION, NEWEST_VERSION):
        assert (SCHEMAS / f"v{version[0]}.{version[1]}.0-local-strict").is_dir()


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_cases_are_valid(case: str) -> None:
    cfg = CASES[case][1]
    oldest = tuple(map(int, cfg.get("server_version", "1.29").split(".")))  # the default
    assert_valid_from(render_case(case), oldest)  # type: ignore[arg-type]


def variants() -> list[tuple[str, AppDef, dict[str, Any]]]:
    """Apps and options beyond the golden cases, one feature at a time."""
    role = echo_app(3).roles[0]
    out: list[tuple[str, AppDef, dict[str, Any]]] = [
        ("retries", AppDef("r", (role.replace(max_retries=3),)), {}),
        ("retries-1.27", AppDef("r", (role.replace(max_retries=3),)), {"server_version": "1.27"}),
        ("requeues-1.29", AppDef("r", (role,)), {"server_version": "1.29", "max_requeues": 0}),
        (
            "replica-retries",
            AppDef("r", (role.replace(max_retries=1, retry_policy=RetryPolicy.REPLICA),)),
            {"server_version": "1.29"},
        ),
        (
            "no-resources",
            AppDef("r", (role.replace(resource=TlResource(cpu=0, gpu=0, memMB=0)),)),
            {},
        ),
        ("ports", AppDef("r", (role.replace(port_map={"c10d": 29500, "metrics": 9090}),)), {}),
        ("two-roles", AppDef("r", (role, Role("ps", "python", image="i"))), {"rdzv_port": 1234}),
        ("secrets", AppDef("r", (role.replace(env={"HF_TOKEN": "t", "A_KEY": "k"}),)), {}),
        ("queued", AppDef("r", (role,)), {"queue": "team-queue"}),
        ("jobset", AppDef("r", (role, Role("ps", "python", image="i"))), {"api": "jobset"}),
        (
            "jobset-1.27",
            AppDef("r", (role.replace(max_retries=2),)),
            {"api": "jobset", "server_version": "1.27"},
        ),
        ("trainjob", AppDef("r", (role.replace(env={"HF_TOKEN": "t"}),)), {"api": "trainjob"}),
    ]
    opts = {
        "service_account": "sa",
        "priority_class": "p",
        "node_selector": {"k": "v"},
        "tolerations": ["a=b:NoSchedule", "c"],
        "labels": {"x": "y"},
        "annotations": {"z": "w"},
        "image_pull_secrets": ["s"],
        "image_pull_policy": "Always",
        "shm_size": "1Gi",
        "metrics_pvc": "metrics-claim",
        "python": "python3",
    }
    out += [(f"opt-{k}", AppDef("r", (role,)), {k: v}) for k, v in opts.items()]
    return out


@pytest.mark.parametrize("label, app, cfg", variants(), ids=[v[0] for v in variants()])
def test_variants_are_valid(label: str, app: AppDef, cfg: dict[str, Any]) -> None:
    resolved = KubernetesScheduler("s").run_opts().resolve({"namespace": "team", **cfg})
    opts = RenderOptions.from_cfg(resolved, "team")
    assert_valid_from(render_app(app, "r-00000", "s", opts), opts.server_version)


@pytest.mark.parametrize("agent", ["bundled", "image"])
def test_the_real_agent_configmap_and_its_volumes_are_valid(agent: str) -> None:
    from k8s_cases import stock_ddp_app

    from trainlaunch.schedulers.kubernetes.bundle import build_agent_zipapp

    resolved = (
        KubernetesScheduler("s")
        .run_opts()
        .resolve({"namespace": "team", "agent": agent, "metrics_pvc": "metrics-claim"})
    )
    opts = RenderOptions.from_cfg(resolved, "team")
    docs = render_app(stock_ddp_app(), "r-00000", "s", opts, build_agent_zipapp())
    kinds = [d["kind"] for d in docs]
    assert kinds == (["Job", "ConfigMap", "Service"] if agent == "bundled" else ["Job", "Service"])
    assert_valid_from(docs, opts.server_version)


def test_newer_fields_are_rendered_only_for_newer_servers() -> None:
    # Rendered for 1.33, the Job uses fields the 1.27 API does not have: server_version matters.
    job = render_case("ddp_all_options")[0]
    errors = " ".join(schema_errors(job, OLDEST_VERSION))
    assert "podReplacementPolicy" in errors and "backoffLimitPerIndex" in errors


@pytest.mark.parametrize(
    "path, value, expect",
    [
        (("spec", "backofLimit"), 1, "backofLimit"),  # a typo: strict schemas reject unknown fields
        (("spec", "completions"), "two", "'two' is not of type"),
        (("spec", "template", "spec", "containers", 0, "env", 1, "value"), 3, "3 is not of type"),
    ],
)
def test_the_validator_catches_mistakes(path: tuple[Any, ...], value: Any, expect: str) -> None:
    job = copy.deepcopy(render_case("echo_defaults")[0])
    target = job
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    for version in (OLDEST_VERSION, NEWEST_VERSION):
        assert any(expect in e for e in schema_errors(job, version)), version
