"""The semantic checks catch what the OpenAPI schemas let through (each case breaks one rule)."""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from typing import Any

import pytest
from k8s_cases import render_case

from trainlaunch.schedulers.kubernetes.checks import check_manifests
from trainlaunch.schedulers.kubernetes.job_checks import MAX_CONFIGMAP_BYTES, configmap_size
from trainlaunch.schedulers.kubernetes.syntax import (
    is_label_value,
    is_port_name,
    is_qualified_name,
    is_quantity,
)

Docs = list[dict[str, Any]]


def pod(docs: Docs) -> dict[str, Any]:
    return docs[0]["spec"]["template"]["spec"]


def container(docs: Docs) -> dict[str, Any]:
    return pod(docs)["containers"][0]


def setitem(get: Callable[[Docs], dict[str, Any]], key: str, value: Any) -> Callable[[Docs], None]:
    return lambda docs: get(docs).__setitem__(key, value)


MUTATIONS: dict[str, tuple[Callable[[Docs], None], str]] = {
    "bad job name": (
        lambda d: d[0]["metadata"].__setitem__("name", "Bad_Name.UPPER"),
        "pod hostname",
    ),
    "hostname too long": (lambda d: d[0]["metadata"].__setitem__("name", "j" * 62), "<= 63"),
    "service starts with digit": (
        lambda d: d[1]["metadata"].__setitem__("name", "1svc"),
        "RFC 1035",
    ),
    "restartPolicy Always": (
        setitem(pod, "restartPolicy", "Always"),
        "restartPolicy must be Never",
    ),
    "not indexed": (setitem(lambda d: d[0]["spec"], "completionMode", "NonIndexed"), "Indexed"),
    "no completions": (lambda d: d[0]["spec"].pop("completions"), "completions >= 1"),
    "parallelism differs": (setitem(lambda d: d[0]["spec"], "parallelism", 1), "parallelism"),
    "bogus action": (
        lambda d: d[0]["spec"]["podFailurePolicy"]["rules"][0].__setitem__("action", "Explode"),
        "Explode",
    ),
    "FailIndex without per-index": (
        lambda d: (
            d[0]["spec"].pop("backoffLimitPerIndex"),  # as rendered for 1.27/1.28
            d[0]["spec"]["podFailurePolicy"]["rules"][0].__setitem__("action", "FailIndex"),
        ),
        "FailIndex",
    ),
    "subdomain names no service": (setitem(pod, "subdomain", "elsewhere"), "names no Service"),
    "service selects other pods": (
        lambda d: d[1]["spec"]["selector"].__setitem__("trainlaunch.io/role", "x"),
        "does not select",
    ),
    "not headless": (
        setitem(lambda d: d[1]["spec"], "clusterIP", "10.0.0.1"),
        "clusterIP must be None",
    ),
    "not publishing unready": (
        setitem(lambda d: d[1]["spec"], "publishNotReadyAddresses", False),
        "publishNotReadyAddresses",
    ),
    "memory lots": (
        lambda d: container(d)["resources"]["limits"].__setitem__("memory", "lots"),
        "quantity",
    ),
    "gpu requests differ": (
        lambda d: container(d)["resources"]["requests"].__setitem__("nvidia.com/gpu", "2"),
        "requests must equal limits",
    ),
    "container name 100 chars": (setitem(container, "name", "c" * 100), "container name"),
    "duplicate env": (
        lambda d: container(d)["env"].append({"name": "TRAINLAUNCH_APP_ID", "value": "x"}),
        "unique",
    ),
    "env without value": (lambda d: container(d)["env"].append({"name": "X"}), "exactly one of"),
    "port name too long": (
        lambda d: container(d)["ports"][0].__setitem__("name", "a-very-long-port-name"),
        "port name",
    ),
    "port out of range": (
        lambda d: container(d)["ports"][0].__setitem__("containerPort", 70000),
        "1..65535",
    ),
    "mount without volume": (lambda d: pod(d).__setitem__("volumes", []), "names no volume"),
    "bad label value": (lambda d: d[0]["metadata"]["labels"].__setitem__("x", "-y-"), "label x"),
    "bad annotation key": (
        lambda d: d[0]["metadata"]["annotations"].__setitem__("a b", "c"),
        "annotation key",
    ),
    "huge annotations": (
        lambda d: d[0]["metadata"]["annotations"].__setitem__("big", "x" * 300_000),
        "256 KiB",
    ),
    "bad namespace": (lambda d: d[0]["metadata"].__setitem__("namespace", "Team"), "namespace"),
    "exists with value": (
        setitem(pod, "tolerations", [{"key": "k", "operator": "Exists", "value": "v"}]),
        "takes no value",
    ),
    "bad service account": (setitem(pod, "serviceAccountName", "Not_OK"), "serviceAccountName"),
    "unknown kind": (
        lambda d: d.append({"kind": "Deployment", "metadata": {"name": "x", "namespace": "team"}}),
        "unexpected kind",
    ),
}


def configmap(docs: Docs) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "ConfigMap")


AGENT_MUTATIONS: dict[str, tuple[Callable[[Docs], None], str]] = {
    "configmap over 1 MiB": (
        lambda d: configmap(d)["binaryData"].__setitem__(
            "agent.pyz", base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
        ),
        "over the API server's limit",
    ),
    "configmap not base64": (
        lambda d: configmap(d)["binaryData"].__setitem__("agent.pyz", "not base64!"),
        "not base64",
    ),
    "configmap bad key": (
        lambda d: configmap(d)["binaryData"].__setitem__("a/b", ""),
        "key 'a/b'",
    ),
    "configmap missing": (lambda d: d.remove(configmap(d)), "needs ConfigMap"),
    "bad claim name": (
        lambda d: pod(d)["volumes"].append(
            {"name": "m", "persistentVolumeClaim": {"claimName": "Bad_Claim"}}
        ),
        "claim 'Bad_Claim'",
    ),
    "two mounts on one path": (
        lambda d: container(d)["volumeMounts"].append({"name": "dshm", "mountPath": "/dev/shm"}),
        "two volumes are mounted",
    ),
}


@pytest.mark.parametrize("mutation", sorted(AGENT_MUTATIONS))
def test_each_broken_agent_rule_is_reported(mutation: str) -> None:
    docs = copy.deepcopy(render_case("ddp_python3_metrics_pvc"))
    assert check_manifests(docs) == []
    change, expect = AGENT_MUTATIONS[mutation]
    change(docs)
    problems = check_manifests(docs)
    assert any(expect in p for p in problems), problems


def test_the_real_agent_configmap_is_measured() -> None:
    from trainlaunch.schedulers.kubernetes.bundle import build_agent_zipapp

    docs = render_case("ddp_stock_image", zipapp=build_agent_zipapp())
    assert check_manifests(docs) == []
    assert configmap_size(configmap(docs)) == len(build_agent_zipapp()) < MAX_CONFIGMAP_BYTES


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_each_broken_rule_is_reported(mutation: str) -> None:
    docs = copy.deepcopy(render_case("echo_defaults"))
    assert check_manifests(docs) == []
    change, expect = MUTATIONS[mutation]
    change(docs)
    problems = check_manifests(docs)
    assert any(expect in p for p in problems), problems


@pytest.mark.parametrize(
    "text, ok",
    [
        ("500m", True),
        ("2", True),
        ("16Gi", True),
        ("1.5", True),
        ("1e3", True),
        ("lots", False),
        ("16GB", False),
        ("-1", False),
        ("", False),
    ],
)
def test_quantities(text: str, ok: bool) -> None:
    assert is_quantity(text) is ok


def test_names() -> None:
    assert is_qualified_name("trainlaunch.io/app") and is_qualified_name("a_b.c")
    assert not is_qualified_name("Bad_Prefix/x") and not is_qualified_name("x" * 64)
    assert is_label_value("") and is_label_value("A.b_c-1") and not is_label_value("x-")
    assert is_port_name("rdzv") and not is_port_name("80") and not is_port_name("a--b")
