"""Why a Slurm job failed or was stopped (docs/failures.md): Slurm's own word for the end
(OUT_OF_MEMORY, TIMEOUT, PREEMPTED, NODE_FAIL, CANCELLED), the hang watchdog's record, else each
node agent's diagnosis from the job dir (agent.json), read together by diagnosis/app.py: the
cause, its fallout on other nodes, a module missing on one node, nodes that never started.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainlaunch.diagnosis import values as v
from trainlaunch.diagnosis.app import NodeOutcome, explain_app
from trainlaunch.diagnosis.values import Diagnosis
from trainlaunch.node.agent_record import read_agent_state
from trainlaunch.node.witness import stopped_node_failure
from trainlaunch.schedulers.slurm.render import STATUS_FILE
from trainlaunch.schedulers.slurm.status import JobInfo, read_kv
from trainlaunch.specs import AppDef, AppState, AppStatus

_SLURM_ENDS = {  # Slurm's state -> (kind, line)
    "OUT_OF_MEMORY": (v.OOM_KILLED, "Slurm killed the job: a step exceeded its memory (OUT_OF_MEMORY)"),
    "TIMEOUT": (v.STOPPED, "stopped by Slurm at the job's time limit (TIMEOUT)"),
    "DEADLINE": (v.STOPPED, "stopped by Slurm at the job's deadline (DEADLINE)"),
    "PREEMPTED": (v.STOPPED, "stopped by Slurm: the job was preempted (PREEMPTED)"),
    "NODE_FAIL": (v.KILLED, "a node of the job failed (NODE_FAIL)"),
    "BOOT_FAIL": (v.KILLED, "a node of the job failed to boot (BOOT_FAIL)"),
}  # fmt: skip


def job_failure(
    info: JobInfo,
    job_dir: Path | None,
    app: AppDef | None,
    status: AppStatus,
    hang: Mapping[str, Any] | None,
) -> Diagnosis | None:
    """The job's diagnosis (None while it runs or when it succeeded)."""
    if status.state not in (AppState.FAILED, AppState.CANCELLED):
        return None
    word = (info.state.split() or [""])[0].rstrip("+")
    nodes = _nodes(job_dir, app) if job_dir is not None and app is not None else []
    ranks = explain_app(nodes)
    if word in _SLURM_ENDS:
        kind, line = _SLURM_ENDS[word]
        evidence = (f"sacct/scontrol: {info.state}",) + ((ranks.line,) if ranks else ())
        return Diagnosis(kind, line, evidence)
    if word == "CANCELLED":
        if hang and hang.get("action") == "stop":
            story = next(iter((hang.get("collectives") or {}).get("lines") or []), "")
            story = story or next(iter(hang.get("summary") or []), "")
            line = (
                f"stopped by the hang watchdog: no progress from any rank for {hang.get('idle_s')}s"
            )
            return Diagnosis(
                v.STOPPED,
                line + (f"; {story}" if story else ""),
                (f"stacks in {hang.get('dump')}",),
            )
        by = info.state.partition(" by ")[2]
        who = f" (scancel by uid {by})" if by else ""
        return Diagnosis(v.STOPPED, f"cancelled: `trainlaunch stop` or scancel{who}")
    return ranks


def _nodes(job_dir: Path, app: AppDef) -> list[NodeOutcome]:
    """Every replica of the job's node-agent roles, the first to fail first."""
    out: list[tuple[float, NodeOutcome]] = []
    for role in app.roles:
        if not role.node_agent:
            continue
        for k in range(role.num_replicas):
            rdir = job_dir / role.name / str(k)
            agent = read_agent_state(str(rdir))
            host = (read_kv(rdir / STATUS_FILE) or {}).get("host", "")
            cause = (agent or {}).get("root_cause") or {}
            found = Diagnosis.from_dict(cause.get("diagnosis") if isinstance(cause, dict) else None)
            found = found or stopped_node_failure(agent)
            when = float((agent or {}).get("ended") or (agent or {}).get("updated") or 1e18)
            out.append((when, NodeOutcome(f"{role.name}/{k}", found, agent is not None, host)))
    out.sort(key=lambda pair: pair[0])
    return [n for _, n in out]


__all__ = ["job_failure"]
