"""Where a Kubernetes app's ranks write metrics, recorded on its Jobs, and whether this machine
can read them (``trainlaunch metrics``).

Without a PVC the metrics stay inside each pod; with ``--cfg metrics_pvc`` they are on the
claim, readable here where the same storage is mounted (``--cfg metrics_local_dir``).
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainlaunch import settings
from trainlaunch.errors import UsageError
from trainlaunch.schedulers.kubernetes.image import DEFAULT_METRICS_MOUNT
from trainlaunch.specs import Role, macros

if TYPE_CHECKING:
    from trainlaunch.schedulers.kubernetes.options import RenderOptions

ANN_METRICS = "trainlaunch.io/metrics"  # where the ranks' metrics go (JSON), for `metrics`


def metrics_record(role: Role, name: str, opts: RenderOptions) -> str | None:
    """Where this role's ranks write metrics, for `trainlaunch metrics` (JSON), if anywhere."""
    path = role.env.get(settings.METRICS_PATH)
    if not path:
        return None
    path = macros.Values(
        img_root="", app_id=name, replica_id="${replica_id}", rank0_env=settings.RANK0_HOST
    ).substitute(path)
    record: dict[str, str] = {"path": path}
    if opts.metrics_pvc:
        record.update(pvc=opts.metrics_pvc, mount=opts.metrics_mount)
        if opts.metrics_local_dir:
            record["local_dir"] = opts.metrics_local_dir
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def read_record(job: Mapping[str, Any]) -> dict[str, Any] | None:
    """The record metrics_record left on a Job (None when absent or unreadable)."""
    raw = (job.get("metadata", {}).get("annotations") or {}).get(ANN_METRICS)
    try:
        record = json.loads(raw) if raw else None
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def metrics_location(app_id: str, record: Any) -> str | None:
    """metrics_local_dir/<app name>/ for a PVC mounted here; else a UsageError saying where."""
    if not isinstance(record, dict) or not record.get("path"):
        return None
    path = str(record["path"])
    if not record.get("pvc"):
        raise UsageError(
            f"the metrics of {app_id} are written inside its pods at {path} and "
            "live as long as each pod's container: copy them from a running pod "
            f"(kubectl cp POD:{path} ./m) or rerun with --cfg metrics_pvc=CLAIM",
            hint="then `trainlaunch metrics HANDLE --path ./m`",
        )
    mount = str(record.get("mount") or DEFAULT_METRICS_MOUNT)
    rel = posixpath.relpath(path, mount) if path.startswith(mount + "/") else None
    if rel is None or not record.get("local_dir"):
        raise UsageError(
            f"the metrics of {app_id} are on PersistentVolumeClaim "
            f"{record['pvc']!r} at {path} in its pods: mount that volume here and pass "
            f"--path DIR/{rel or ''}",
            hint="or submit with --cfg metrics_local_dir=DIR (where the claim's storage "
            "is mounted on this machine)",
        )
    return os.path.join(str(record["local_dir"]), rel).replace("{rank}", "*")
