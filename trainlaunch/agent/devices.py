"""``--nproc-per-node auto|cpu|gpu`` without torch (devices counted by trainlaunch.node.devices)."""

from __future__ import annotations

from collections.abc import Mapping

from trainlaunch.errors import UsageError
from trainlaunch.node.devices import cpu_count, gpu_count


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
