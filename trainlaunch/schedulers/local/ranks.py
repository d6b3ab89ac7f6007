"""The ranks of a local app: pid, state and the files whose growth means progress.

A dist.ddp replica is a node agent (its workers come from its ``agent.json``, see
stacks/progress.py); any other replica is one rank, numbered in plan order, whose output
is the replica's own ``stdout.log``/``stderr.log``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainlaunch.node import processes
from trainlaunch.node.agent_record import read_agent_state
from trainlaunch.node.exits import shell_code
from trainlaunch.stacks.progress import RankProgress, agent_ranks, extra_files, progress_rows

LocalRank = RankProgress  # one rank of a local app


def _is_agent(plan: Mapping[str, Any]) -> bool:
    return plan.get("node_agent") is True  # the request says so (Role.node_agent)


def app_ranks(
    app_dir: Path, request: Mapping[str, Any], state: Mapping[str, Any] | None
) -> list[RankProgress]:
    """Every rank known from the records, in rank order (agents' workers once they started)."""
    recs = {(r.get("role"), r.get("replica_id")): r for r in (state or {}).get("replicas", [])}
    host = os.uname().nodename  # socket.gethostname(), without importing socket for status
    out: list[RankProgress] = []
    for index, plan in enumerate(request.get("replicas", [])):
        rec = recs.get((plan["role"], plan["replica_id"]), {})
        log_dir = app_dir / plan["log_dir"]
        started = float(rec.get("started") or 0.0)
        live = rec.get("state") == "RUNNING" and processes.same_process_alive(
            rec.get("pid"), rec.get("ticks")
        )
        if _is_agent(plan):
            agent = read_agent_state(str(log_dir))
            # a record left by an earlier start of this replica names dead workers: ignore it
            if agent and agent.get("pid") == rec.get("pid"):
                role, k = plan["role"], plan["replica_id"]
                out.extend(agent_ranks(agent, role, k, plan["env"], started, live, host=host))
            continue
        out.append(
            RankProgress(
                rank=index,
                role=plan["role"],
                replica_id=plan["replica_id"],
                pid=rec.get("pid"),
                ticks=rec.get("ticks"),
                running=live,
                exit_code=shell_code(rec.get("exit_code")),
                started=started,
                files=(
                    log_dir / "stdout.log",
                    log_dir / "stderr.log",
                    *extra_files(plan["env"], index),
                ),
                host=host,
            )
        )
    out.sort(key=lambda r: r.rank)
    return out


__all__ = ["LocalRank", "app_ranks", "progress_rows"]
