"""What `stop` keeps of a Kubernetes app it deleted, in the local store: so `status` and `list`
still say CANCELLED (and a --max-parallel sweep's finished points keep their verdicts) once
nothing of it is left on the cluster."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from trainlaunch import store
from trainlaunch.schedulers.kubernetes import sweep as k8s_sweep


def record(ns: str, name: str, jobs: list[dict[str, Any]]) -> None:
    """Remember that app ns:name was stopped (jobs: its Job views, for a sweep's indexes)."""
    store.write_json(
        _dir() / f"{ns}_{name}.json",
        {"namespace": ns, "name": name, "stopped": time.time(), **_indexes(jobs)},
    )


def _dir() -> Path:
    return store.ensure_private_dir(store.ensure_private_dir(store.store_root()) / "kubernetes")


def record_of(ns: str, name: str) -> dict[str, Any] | None:
    """What `stop` recorded of app ns:name (None: it did not stop it here)."""
    rec = store.read_json_or_none(store.store_root() / "kubernetes" / f"{ns}_{name}.json")
    return rec if isinstance(rec, dict) else None


def records(ns: str) -> list[dict[str, Any]]:
    """Every app `stop` recorded in namespace ns."""
    out: list[dict[str, Any]] = []
    found = store.existing_private_dir(store.store_root() / "kubernetes")  # a query creates none
    for path in sorted(found.glob(f"{ns}_*.json")) if found else []:
        rec = store.read_json_or_none(path)
        if isinstance(rec, dict) and rec.get("namespace") == ns and rec.get("name"):
            out.append(rec)
    return out


def _indexes(jobs: list[dict[str, Any]]) -> dict[str, str]:
    """A sweep Job's completed and failed indexes, kept when it is stopped (points keep them)."""
    status = next((j.get("status") or {} for j in jobs if k8s_sweep.is_sweep_job(j)), None)
    if status is None:
        return {}
    return {
        "completed": status.get("completedIndexes") or "",
        "failed": status.get("failedIndexes") or "",
    }
