"""`trainlaunch doctor`'s Kubernetes lines: the real client asking the (fake) API server,
RBAC through SelfSubjectAccessReview as kubectl auth can-i does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from k8s_fake_apiserver import FakeApiServer

from trainlaunch.errors import ExitCode

pytestmark = pytest.mark.slow  # each run imports torch once, in the ranks' interpreter


def doctor(
    kubeconfig: Path, tmp_path: Path, config: str = ""
) -> tuple[int, dict[str, dict[str, Any]]]:
    env = {
        "PATH": "/usr/bin:/bin",
        "KUBECONFIG": str(kubeconfig),
        "TRAINLAUNCH_HOME": str(tmp_path / "home"),
        "TRAINLAUNCH_CONFIG": config,
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
    }
    r = subprocess.run(
        [sys.executable, "-m", "trainlaunch", "doctor", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    return r.returncode, checks


def test_the_context_the_server_and_what_rbac_allows(
    fake_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    _, checks = doctor(kubeconfig, tmp_path)
    assert checks["kube context"]["detail"] == "fake, namespace team"
    assert checks["kube api"]["detail"] == f"{fake_api.url}: Kubernetes v1.33.0"
    assert checks["kube rbac"]["status"] == "ok"
    asked = [r.body for r in fake_api.requests if r.path.endswith("selfsubjectaccessreviews")]
    attrs = {
        (a["verb"], a["group"], a["resource"])
        for a in (b["spec"]["resourceAttributes"] for b in asked)
    }
    assert ("create", "batch", "jobs") in attrs and ("get", "", "pods") in attrs
    assert {b["spec"]["resourceAttributes"]["namespace"] for b in asked} == {"team"}


def test_a_verb_rbac_refuses_is_a_failure_with_the_fix(
    fake_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    fake_api.deny("create", "jobs", "batch")
    fake_api.deny("get", "pods", "", "log")
    code, checks = doctor(kubeconfig, tmp_path)
    assert code == ExitCode.APP_FAILED
    rbac = checks["kube rbac"]
    assert rbac["status"] == "fail"
    assert rbac["detail"] == "namespace team: may not create jobs.batch, get pods/log"
    assert "kubectl auth can-i create jobs.batch -n team" in rbac["fix"]


def test_secrets_and_the_configured_target_are_asked_for_too(
    fake_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    # --env secrets become a Secret on every target; api=jobset creates JobSets (kubernetes.md)
    config = tmp_path / "trainlaunch.toml"
    config.write_text('[scheduler.kubernetes]\napi = "jobset"\n')
    fake_api.deny("create", "secrets")
    fake_api.deny("create", "jobsets", "jobset.x-k8s.io")
    code, checks = doctor(kubeconfig, tmp_path, str(config))
    assert code == ExitCode.APP_FAILED
    assert checks["kube rbac"]["detail"] == (
        "namespace team: may not create secrets, create jobsets.jobset.x-k8s.io"
    )


def test_an_api_server_that_does_not_answer(tmp_path: Path) -> None:
    from k8s_helpers import write_kubeconfig

    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1")
    code, checks = doctor(kubeconfig, tmp_path)
    assert code == ExitCode.APP_FAILED
    assert checks["kube api"]["status"] == "fail"
    assert (
        "cannot reach the Kubernetes API server at https://127.0.0.1:1"
        in checks["kube api"]["detail"]
    )
