"""schedulers/local/state.py: what the local store's records mean when the supervisor is gone."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

from trainlaunch import store
from trainlaunch.node import processes
from trainlaunch.schedulers.local.state import derive_status, status_from_record
from trainlaunch.specs import AppState


def test_an_orphaned_app_keeps_every_replica_field_but_its_state(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = processes.start_ticks(gone.pid)
    gone.wait()  # the supervisor: dead, its pid reaped
    me = os.getpid()  # a replica still running
    request = {"replicas": [{"role": "r", "replica_id": 0, "log_dir": "logs/r/0"}]}
    request["created"] = time.time()
    replica = {"role": "r", "replica_id": 0, "state": "RUNNING", "pid": me}
    replica.update(ticks=processes.start_ticks(me), hostname="h", restarts=2, message="m")
    state = {"state": "RUNNING", "replicas": [replica]}
    state["supervisor"] = {"pid": gone.pid, "ticks": ticks, "boot_id": processes.boot_id()}
    store.write_json(tmp_path / "state.json", state)

    status = derive_status(tmp_path, request)

    assert status.state == AppState.UNKNOWN and "died" in status.msg
    recorded = status_from_record({**request, "app_dir": str(tmp_path)}, state)
    (role,) = recorded.roles
    unknown = tuple(dataclasses.replace(r, state=AppState.UNKNOWN) for r in role.replicas)
    assert status.roles == (dataclasses.replace(role, replicas=unknown),)
    assert status.roles[0].replicas[0].pid == me and status.roles[0].replicas[0].restarts == 2
    same = dataclasses.replace(status, state=recorded.state, msg=recorded.msg, roles=recorded.roles)
    assert same == recorded  # every other field of the app's status kept too


def test_a_supervisor_killed_before_any_replica_started_is_failed_not_unknown(
    tmp_path: Path,
) -> None:
    """Issue 23 #16: nothing ran, so nothing's exit code is missing."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = processes.start_ticks(gone.pid)
    gone.wait()
    request = {"replicas": [{"role": "r", "replica_id": 0, "log_dir": "logs/r/0"}]}
    request["created"] = time.time()
    state = {"state": "RUNNING", "replicas": [{"role": "r", "replica_id": 0, "state": "PENDING"}]}
    state["supervisor"] = {"pid": gone.pid, "ticks": ticks, "boot_id": processes.boot_id()}
    store.write_json(tmp_path / "state.json", state)

    status = derive_status(tmp_path, request)

    assert status.state == AppState.FAILED and status.is_terminal, status
    assert "before it started any replica" in status.msg and "not recorded" not in status.msg
    (tmp_path / "logs" / "r" / "0").mkdir(parents=True)  # a replica was started: unknown end
    assert derive_status(tmp_path, request).state == AppState.UNKNOWN
