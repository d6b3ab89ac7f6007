"""Where the node agent's ``agent.json`` lives and how to read it: the agent writes it
(agent/state.py), backends read it (restarts, root cause, worker pids), so neither imports
the other.
"""

from __future__ import annotations

import json
import os
from typing import Any

AGENT_FILE = "agent.json"


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
