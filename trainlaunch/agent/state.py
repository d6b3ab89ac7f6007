"""``agent.json``: what the node agent is doing, for the backend to read.

Written atomically (temp file + rename) into the replica's log directory when an attempt
starts and ends: engine, attempts and restarts, each worker's pid/pgid/start ticks/exit
code/signal, the log directory and the root cause. A backend's ``stop`` may kill the
recorded worker process groups as a last resort; its ``status`` shows restarts and cause.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainlaunch import store
from trainlaunch.errors import StoreError
from trainlaunch.node.agent_record import AGENT_FILE, agent_file, read_agent_state  # noqa: F401

VERSION = 1


def write_atomic(path: str, data: Mapping[str, Any]) -> None:
    """Replace path with data as JSON (store.write_json: fsynced, atomic); warn if it fails."""
    if os.path.exists(path) and not os.path.isfile(path):
        return  # e.g. TORCHELASTIC_ERROR_FILE=/dev/null: never replace a device
    try:
        store.write_json(Path(path), dict(data))
    except StoreError as e:  # the record is a convenience: it must not fail the training
        os.write(2, f"trainlaunch.agent: warning: {e}\n".encode())


class AgentRecord:
    """The mutable record behind agent.json (only the agent writes it)."""

    def __init__(self, path: str | None, **fields: Any) -> None:
        self.path = path  # None: nowhere to write (--log-dir /dev/null without a replica dir)
        self.data: dict[str, Any] = {
            "version": VERSION,
            "pid": os.getpid(),
            "state": "STARTING",
            "restarts": 0,
            "attempts": [],
            "workers": [],
            "root_cause": None,
            "exit_code": None,
            "started": time.time(),
            **fields,
        }

    def update(self, **fields: Any) -> None:
        """Change some fields and write the record."""
        self.data.update(fields, updated=time.time())
        if self.path:
            write_atomic(self.path, self.data)
