"""Where `trainlaunch metrics` looks: the recorded path, relative ones from the app's cwd, and
what each backend adds (the Kubernetes one says in one line what is possible)."""

from __future__ import annotations

from typing import Any

import pytest

from trainlaunch.errors import UsageError
from trainlaunch.schedulers import get_scheduler
from trainlaunch.schedulers.api import DescribeAppResponse, recorded_metrics_path
from trainlaunch.specs import AppDef, AppState, AppStatus, Role


def resp(path: str | None, app_id: str = "42", **metadata: Any) -> DescribeAppResponse:
    meta = {"trainlaunch": {"metrics_path": path}} if path else {}
    app = AppDef("a", (Role("r", "true"),), metadata=meta)
    return DescribeAppResponse(app_id, AppStatus(AppState.SUCCEEDED), app, metadata=metadata)


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
    meta = {"cwd": cwd} if cwd else {}
    for backend in ("local", "slurm"):
        assert get_scheduler(backend, "s").metrics_location(resp(path, **meta)) == expect


def test_nothing_recorded_is_none() -> None:
    assert recorded_metrics_path(resp(None)) is None
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
