"""Where the node agent's ``agent.json`` lives and how to read it: the agent writes it
(agent/state.py), backends read it (restarts, root cause, worker pids), so neither imports
the other.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from trainlaunch.node import processes

AGENT_FILE = "agent.json"
# after a failed preflight: the scheduler names of the nodes it blamed, one a line (Slurm
# excludes them when it requeues, docs/preflight.md)
PREFLIGHT_EXCLUDE_FILE = "preflight.exclude"


def agent_file(replica_log_dir: str) -> str:
    """Where a replica's agent.json lives."""
    return os.path.join(replica_log_dir, AGENT_FILE)


def read_agent_state(replica_log_dir: str) -> dict[str, Any] | None:
    """The agent's last record for a replica (None if absent or unreadable)."""
    try:
        with open(agent_file(replica_log_dir), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def worker_groups(app_dir: Path, live: bool) -> list[int]:
    """Process groups of a local app's node-agent workers (each leads its own), as its agents
    recorded them (agent.json); live: only those still running."""
    groups: list[int] = []
    for agent in app_dir.glob(f"logs/*/*/{AGENT_FILE}"):
        rec = read_agent_state(str(agent.parent)) or {}
        for w in rec.get("workers", []):
            pid = w.get("pid") if isinstance(w, Mapping) else None
            if pid and (not live or processes.same_process_alive(pid, w.get("ticks"))):
                groups.append(int(w.get("pgid") or pid))
    return groups


def waiting_record(replica_log_dirs: Iterable[str]) -> dict[str, Any] | None:
    """What the first of these node agents that waits for another node recorded (None: none
    waits): ``line`` (``node 0 of 2 waiting for 1 more node at H:P``), ``since``, ``missing``
    node ranks, ``node_rank``, ``nnodes``, ``at`` (agent/joins.py; read it while running only:
    a killed agent leaves its last record)."""
    for d in replica_log_dirs:
        waiting = (read_agent_state(d) or {}).get("waiting")
        if isinstance(waiting, dict) and waiting.get("line"):
            return waiting
    return None


def preflight_record(replica_log_dirs: Iterable[str]) -> dict[str, Any] | None:
    """The preflight's verdict as the first of these node agents recorded it (None: none ran).

    Node 0's agent (the first replica) decides for the job: its record is the job's. The
    fingerprint each agent keeps of its own node stays in its agent.json.
    """
    for d in replica_log_dirs:
        state = read_agent_state(d) or {}
        verdict = state.get("preflight")
        if isinstance(verdict, dict):
            return {k: v for k, v in verdict.items() if k != "fingerprint"}
    return None
