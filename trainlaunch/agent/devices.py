"""``--nproc-per-node auto|cpu|gpu`` without torch: count CPUs and NVIDIA GPUs."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from trainlaunch import settings
from trainlaunch.errors import UsageError


def cpu_count() -> int:
    """CPUs this process may run on (torch._utils.cpu_count's rule)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def gpu_count(environ: Mapping[str, str]) -> int:
    """Visible NVIDIA GPUs: TRAINLAUNCH_GPU_COUNT, else CUDA_VISIBLE_DEVICES, else nvidia-smi."""
    override = environ.get(settings.GPU_COUNT)
    if override:
        return int(override)
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:  # torch counts the listed ids up to the first invalid one
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        return 0 if not ids or ids[0].startswith("-") else len(ids)
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def local_nproc(value: str, environ: Mapping[str, str]) -> int:
    """Workers on this node for a --nproc-per-node value (torchrun's determine_local_world_size)."""
    try:
        return int(value)
    except ValueError:
        pass
    if value == "cpu":
        return cpu_count()
    if value in ("gpu", "auto"):
        n = gpu_count(environ)
        if n:
            return n
        if value == "gpu":
            raise UsageError("--nproc-per-node gpu: CUDA is not available (no GPU visible)")
        return cpu_count()
    # xpu and private-use backends need torch: the agent hands them to torchrun
    raise UsageError(
        f"--nproc-per-node {value} needs torch to count devices",
        hint="use --engine torchrun or give a number",
    )
