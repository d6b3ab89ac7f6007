"""A sweep as one Slurm job array: element i runs point i's body (docs/slurm.md "Job arrays").

Pure: the points' scripts come from render.render_parts(array=True); this module checks that
they can share one array (same resources, plain jobs, a script sbatch accepts) and joins them.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainlaunch.errors import UsageError

MAX_SCRIPT_BYTES = 4 * 1024 * 1024  # Slurm's default max_script_size (SchedulerParameters)


def array_mismatch(heads: Sequence[Sequence[str]]) -> str:
    """Why these scripts cannot be one job array ('' if they can): they must ask for the
    same resources (the same #SBATCH lines but the job name) and be plain jobs."""
    if any("#SBATCH hetjob" in h for h in heads):
        return "its apps have several roles (heterogeneous jobs cannot be job arrays)"

    def request(head: Sequence[str]) -> list[str]:
        return [ln for ln in head if ln.startswith("#SBATCH") and "--job-name=" not in ln]

    first = request(heads[0]) if heads else []
    for i, head in enumerate(heads[1:], 1):
        if request(head) != first:
            diff = next((ln for ln in request(head) if ln not in first), "")
            return f"its points ask for different resources (point {i}: {diff[8:] or 'fewer'})"
    return ""


def array_too_big(script: str) -> str:
    """Why sbatch would refuse the array script ('' if it would not): its size."""
    size = len(script.encode("utf-8"))
    if size <= MAX_SCRIPT_BYTES:
        return ""
    return (
        f"the array script would be {size / 2**20:.1f} MiB, over Slurm's default "
        f"max_script_size of {MAX_SCRIPT_BYTES // 2**20} MiB"
    )


def render_array(parts: Sequence[tuple[list[str], list[str]]], max_parallel: int | None) -> str:
    """One job array: element i runs point i's body (parts from render_parts(array=True))."""
    heads = [h for h, _ in parts]
    why = array_mismatch(heads)
    if why or not parts:
        raise UsageError(f"cannot submit these apps as one Slurm job array: {why or 'no apps'}")
    n = len(parts)
    throttle = f"%{max_parallel}" if max_parallel else ""
    lines = [
        "#!/bin/bash",
        f"# trainlaunch: {n} apps as one Slurm job array; element i runs app i "
        "(app id ARRAYJOB_i, job dir per element)",
        *[ln for ln in heads[0] if ln.startswith("#SBATCH")],
        f"#SBATCH --array=0-{n - 1}{throttle}",
    ]
    for i, (head, body) in enumerate(parts):
        lines += ["", head[1], f"trainlaunch_element_{i}() {{", *body, "}"]
    lines += [
        "",
        'case "${SLURM_ARRAY_TASK_ID:-}" in',
        *[f"    {i}) trainlaunch_element_{i} ;;" for i in range(n)],
        '    *) echo "trainlaunch: no element ${SLURM_ARRAY_TASK_ID:-} in this array" >&2; exit 1 ;;',
        "esac",
    ]
    return "\n".join(lines) + "\n"


__all__ = ["MAX_SCRIPT_BYTES", "array_mismatch", "array_too_big", "render_array"]
