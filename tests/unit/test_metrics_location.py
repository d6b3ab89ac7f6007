"""Where `trainlaunch metrics` looks: the recorded path, relative ones from the app's cwd, and
what each backend adds (the Kubernetes one says in one line what is possible)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from trainlaunch.errors import UsageError
from trainlaunch.metrics.location import recorded_path, require
from trainlaunch.schedulers import get_scheduler
from trainlaunch.schedulers.api import DescribeAppResponse
from trainlaunch.specs import AppDef, AppState, AppStatus, Role


def resp(
    path: str | None, app_id: str = "42", cwd: str | None = None, **metadata: Any
) -> DescribeAppResponse:
    meta = {"trainlaunch": {"metrics_path": path}} if path else {}
    app = AppDef("a", (Role("r", "true"),), metadata=meta)
    status = AppStatus(AppState.SUCCEEDED)
    return DescribeAppResponse(app_id, status, app, metadata=metadata, cwd=cwd)


@pytest.mark.parametrize(
    "path, cwd, expect",
    [
        ("/data/${app_id}/metrics/", "/w", "/data/42/metrics/"),
        ("./m/", "/w/run", "/w/run/m/"),
        ("m/{rank}.jsonl", "/w", "/w/m/*.jsonl"),
        ("m.jsonl", None, "m.jsonl"),  # no recorded cwd: as it was recorded
    ],
)
def test_slurm_and_local_read_the_recorded_path(path: str, cwd: str | None, expect: str) -> None:
    for backend in ("local", "slurm"):
        assert get_scheduler(backend, "s").metrics_location(resp(path, cwd=cwd)) == expect


def test_every_backend_and_the_cli_read_one_rule() -> None:
    # a Kubernetes app without a metrics record used to fall back to a rule of the CLI's own,
    # which took a relative path from wherever `trainlaunch metrics` ran and skipped ``~``
    for path, expect in (("m/{rank}.jsonl", "/w/m/*.jsonl"), ("~/m/", os.path.expanduser("~/m/"))):
        for backend in ("local", "slurm", "kubernetes"):
            assert get_scheduler(backend, "s").metrics_location(resp(path, cwd="/w")) == expect


def test_nothing_recorded_is_none() -> None:
    assert recorded_path("42", resp(None).app, {}) is None
    assert get_scheduler("local", "s").metrics_location(resp(None, cwd="/w")) is None


def test_kubernetes_without_a_pvc_says_where_in_one_line() -> None:
    k8s = get_scheduler("kubernetes", "s")
    r = resp("/tmp/trainlaunch/metrics/", "team:a-1", metrics={"path": "/tmp/trainlaunch/metrics/"})
    with pytest.raises(UsageError) as e:
        k8s.metrics_location(r)
    assert "\n" not in str(e.value) and "inside its pods" in str(e.value)


def test_kubernetes_with_a_pvc_mounted_here() -> None:
    record = {
        "path": "/mnt/m/a-1/",
        "pvc": "claim",
        "mount": "/mnt/m",
        "local_dir": "/nfs/claim",
    }
    k8s = get_scheduler("kubernetes", "s")
    assert k8s.metrics_location(resp(None, "team:a-1", metrics=record)) == "/nfs/claim/a-1"
    record["path"] = "/mnt/m/a-1/{rank}.jsonl"
    assert k8s.metrics_location(resp(None, "team:a-1", metrics=record)) == "/nfs/claim/a-1/*.jsonl"
    record["path"] = "/elsewhere/x/"  # --metrics-path off the claim: not readable here
    with pytest.raises(UsageError, match="PersistentVolumeClaim 'claim'"):
        k8s.metrics_location(resp(None, "team:a-1", metrics=record))


def test_kubernetes_apps_without_a_record_fall_back() -> None:
    assert get_scheduler("kubernetes", "s").metrics_location(resp(None, "team:a-1")) is None


def test_an_app_without_a_metrics_path_is_a_usage_error_that_says_what_to_pass() -> None:
    with pytest.raises(UsageError, match="app 42 recorded no metrics path") as e:
        require("42", get_scheduler("local", "s").metrics_location(resp(None)))
    assert "--path" in (e.value.hint or "")
    assert require("42", "/m/") == "/m/"
