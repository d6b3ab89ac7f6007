"""What this machine offers a job, without torch: CPUs and NVIDIA GPUs (one rule for all).

The local backend slices GPUs between replicas with it and the node agent counts
``--nproc-per-node gpu|auto`` with it, so both see the same devices.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping

from trainlaunch import settings


def cpu_count() -> int:
    """CPUs this process may run on (torch._utils.cpu_count's rule)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cuda_visible_ids(environ: Mapping[str, str]) -> list[str] | None:
    """The ids CUDA_VISIBLE_DEVICES lists, up to the first invalid one (as CUDA); None if unset."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    ids = []
    for item in visible.split(","):
        item = item.strip()
        if not item or item.startswith("-"):  # CUDA stops at the first invalid id
            break
        ids.append(item)
    return ids


def visible_gpus(environ: Mapping[str, str], count: int | None = None) -> list[str]:
    """The ids of the NVIDIA GPUs processes started here may use.

    CUDA_VISIBLE_DEVICES, when set, names them; otherwise they are 0..n-1 where n is the
    count (``count``, else $TRAINLAUNCH_GPU_COUNT, else ``nvidia-smi -L``). A count also caps
    the CUDA_VISIBLE_DEVICES list.
    """
    if count is None and environ.get(settings.GPU_COUNT):
        count = int(environ[settings.GPU_COUNT])
    ids = cuda_visible_ids(environ)
    if ids is not None:
        return ids if count is None else ids[:count]
    if count is None:
        count = _nvidia_smi_count()
    return [str(i) for i in range(count)]


def gpu_count(environ: Mapping[str, str], count: int | None = None) -> int:
    """How many GPUs visible_gpus finds."""
    return len(visible_gpus(environ, count))


def _nvidia_smi_count() -> int:
    import shutil  # here: the node agent imports this module on every start, most with no GPU

    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))
