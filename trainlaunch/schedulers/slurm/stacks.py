"""Hangs on Slurm: ``stack`` (py-spy on every node in one ``srun --overlap`` step) and status.

The ranks come from the job dir: each dist.ddp replica's ``agent.json`` (global rank, pid,
exit code of every worker) and its ``replica.status`` (the node it runs on). One job step with
one task per node runs ``python -m trainlaunch.stacks.dump`` there; each task dumps the ranks of
its own node (``$SLURMD_NODENAME``) in parallel and prints them as JSON. Replicas that are not
node agents record no rank pids, so they cannot be dumped (said per replica). ``hang_view``
adds per-rank progress, the stall and the watchdog's last hang (stacks/watchdog.py) to
``status``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trainlaunch.errors import SchedulerError
from trainlaunch.node.agent_record import read_agent_state
from trainlaunch.node.exits import shell_code
from trainlaunch.schedulers.slurm.render import STATUS_FILE, node_python
from trainlaunch.schedulers.slurm.status import read_kv
from trainlaunch.specs import AppDef, AppState, AppStatus, macros
from trainlaunch.stacks.dump import PYSPY_TIMEOUT_S, Target
from trainlaunch.stacks.progress import RankProgress, agent_ranks
from trainlaunch.stacks.values import ERROR, RankStack
from trainlaunch.stacks.watchdog import status_view

SRUN_EXTRA_S = 60.0  # on top of py-spy's own timeout: starting a step on every node


def job_targets(job_dir: Path, app: AppDef) -> tuple[list[Target], list[str]]:
    """The ranks of every node-agent replica, and a note for each replica without any."""
    targets: list[Target] = []
    notes: list[str] = []
    for role in app.roles:
        for k in range(role.num_replicas):
            rdir = job_dir / role.name / str(k)
            host = (read_kv(rdir / STATUS_FILE) or {}).get("host", "")
            agent = read_agent_state(str(rdir))
            workers = (agent or {}).get("workers") or []
            if not host or not workers:
                why = "not started yet" if host else "not running yet"
                if host and not role.node_agent:
                    why = "not a dist.ddp node agent: its rank pids are not recorded"
                notes.append(f"{role.name}/{k}: {why}")
                continue
            for w in workers:
                code = shell_code(w.get("exit_code"))
                targets.append(
                    Target(
                        rank=int(w["rank"]),
                        pid=w.get("pid"),
                        host=host,
                        role=role.name,
                        replica_id=k,
                        exit_code=code,
                        ended=code is not None or agent.get("state") != "RUNNING",  # type: ignore[union-attr]
                        recorder=str(w.get("recorder") or ""),
                    )
                )
    return targets, notes


def job_progress(job_id: str, job_dir: Path, app: AppDef) -> list[RankProgress]:
    """Every dist.ddp rank's progress from the job dir (status's straggler view on Slurm)."""
    out: list[RankProgress] = []
    for role in app.roles:
        env = {k: v.replace(macros.app_id, job_id) for k, v in role.env.items()}
        for k in range(role.num_replicas):
            rdir = job_dir / role.name / str(k)
            agent = read_agent_state(str(rdir))
            live = bool(agent) and agent.get("state") == "RUNNING"  # type: ignore[union-attr]
            start = float((read_kv(rdir / STATUS_FILE) or {}).get("start") or 0.0)
            out.extend(agent_ranks(agent, role.name, k, env, start, live, check_pids=False))
    return sorted(out, key=lambda r: r.rank)


def hang_view(
    job_id: str, job_dir: Path, app: AppDef | None, cfg: Mapping[str, Any], status: AppStatus
) -> tuple[AppStatus, dict[str, Any]]:
    """Status metadata: per-rank progress and stall (running), the watchdog's last hang."""

    def ranks() -> list[RankProgress]:
        return job_progress(job_id, job_dir, app) if app is not None else []

    running = status.state == AppState.RUNNING and app is not None
    meta = status_view(ranks, cfg, job_dir, running)
    hang = meta.get("hang")
    if hang is not None and status.state == AppState.CANCELLED and hang.get("action") == "stop":
        msg = (
            f"hung: no progress from any rank for {hang.get('idle_s')}s; cancelled by the "
            f"hang watchdog; stacks in {hang.get('dump')}"
        )
        status = dataclasses.replace(status, msg=msg)
    return status, meta


def dump_job(
    job_id: str,
    job_dir: Path,
    app: AppDef,
    native: bool,
    run: Callable[..., Any],
) -> list[RankStack]:
    """Every rank's stack; ``run`` is the backend's run_slurm (one srun step on all nodes)."""
    targets, notes = job_targets(job_dir, app)
    if not targets:
        raise SchedulerError(
            f"slurm job {job_id}: no rank to dump ({'; '.join(notes) or 'no replica records'})",
            hint="`trainlaunch stack` on Slurm needs dist.ddp replicas (their agents record "
            "the rank pids)",
        )
    return dump_targets(job_id, targets, node_python(app), native, run)


def dump_targets(
    job_id: str,
    targets: list[Target],
    python: str,
    native: bool,
    run: Callable[..., Any],
) -> list[RankStack]:
    """py-spy on every node of the job at once: one srun --overlap step, one task per node."""
    live = [t for t in targets if not t.ended]
    nodes = sorted({t.host for t in live})
    found: dict[int, RankStack] = {}
    err = ""
    if nodes:
        argv = [
            "srun",
            "--overlap",
            # the job's steps may hold all of its memory (DefMemPerCPU, no --mem): without
            # --mem=0 (the job's memory, shared) a new step is refused "Memory required by
            # task is not available"; a small fixed request would cap py-spy under cgroups
            "--mem=0",
            f"--jobid={job_id}",
            f"--nodelist={','.join(nodes)}",
            f"--nodes={len(nodes)}",
            f"--ntasks={len(nodes)}",
            "--ntasks-per-node=1",
            "--kill-on-bad-exit=0",
            "--label",  # the tasks' output interleaves: each line (and 1 KiB piece) says whose
            python,
            "-m",
            "trainlaunch.stacks.dump",
            *(["--native"] if native else []),
            json.dumps([t.to_dict() for t in live]),
        ]
        proc = run(argv, check=False, timeout=PYSPY_TIMEOUT_S + SRUN_EXTRA_S)
        for doc in task_outputs(proc.stdout):
            try:
                found.update({s.rank: s for s in map(RankStack.from_dict, json.loads(doc))})
            except (ValueError, TypeError, KeyError):
                continue
        last = next((ln for ln in reversed(proc.stderr.splitlines()) if ln.strip()), "")
        err = last or f"srun exited {proc.returncode} saying nothing"
    out = []
    for t in targets:
        if t.ended:
            out.append(t.stack(state="exited", exit_code=t.exit_code))
        elif t.rank in found:
            out.append(found[t.rank])
        else:
            out.append(t.stack(state=ERROR, error=f"node {t.host} did not answer ({err})"))
    return out


_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")


def task_outputs(stdout: str) -> list[str]:
    """Each task's output from srun --label's: srun cuts a long line into 1 KiB pieces and
    interleaves the tasks' pieces, each labelled; a task's pieces in order are its one line."""
    pieces: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        m = _LABEL.match(line)
        if m:
            pieces.setdefault(m[1], []).append(m[2])
    return ["".join(p) for p in pieces.values()]


__all__ = [
    "dump_job",
    "dump_targets",
    "hang_view",
    "job_progress",
    "job_targets",
    "node_python",
    "task_outputs",
]
