"""The GPUs of this machine and which rank uses which, through ``nvidia-smi`` (none: [])."""

from __future__ import annotations

import time
from typing import Any

SMI_TIMEOUT_S = 5.0
FRESH_S = 2.0  # a view refreshing every second asks nvidia-smi at most this often
_answers: dict[tuple[str, tuple[str, ...]], tuple[float, list[dict[str, str]]]] = {}


def _query(what: str, fields: tuple[str, ...]) -> list[dict[str, str]]:
    """nvidia-smi's rows, or the ones it gave less than FRESH_S ago (one process per view
    refresh is what it costs: the page and top ask for every app they show)."""
    from trainlaunch.doctor.gpus import smi_query

    now = time.monotonic()
    seen = _answers.get((what, fields))
    if seen is None or now - seen[0] >= FRESH_S:
        seen = (now, smi_query(what, fields, SMI_TIMEOUT_S)[0] or [])
        _answers[(what, fields)] = seen
    return seen[1]


def gpus() -> list[dict[str, Any]]:
    """Each GPU's index, utilisation (%) and memory (MiB used, total)."""
    fields = ("index", "uuid", "utilization.gpu", "memory.used", "memory.total")
    return [
        {
            "index": _int(r["index"]),
            "uuid": r["uuid"],
            "util": _int(r["utilization.gpu"]),
            "mem_used_mib": _int(r["memory.used"]),
            "mem_total_mib": _int(r["memory.total"]),
        }
        for r in _query("gpu", fields)
    ]


def by_pid(devices: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """pid -> the GPU it computes on (index, its utilisation) and the memory it holds there."""
    index = {d["uuid"]: d for d in devices}
    out: dict[int, dict[str, Any]] = {}
    for r in _query("compute-apps", ("pid", "gpu_uuid", "used_memory")) if devices else []:
        pid, gpu = _int(r["pid"]), index.get(r["gpu_uuid"])
        if pid is not None and gpu is not None:
            out[pid] = {"gpu": gpu["index"], "util": gpu["util"], "mem_mib": _int(r["used_memory"])}
    return out


def _int(text: str) -> int | None:
    try:
        return int(float(text))
    except ValueError:
        return None


__all__ = ["by_pid", "gpus"]
