"""What the local backend shows of hangs: stack dumps on request, stalls and stragglers.

``stack`` dumps every rank with py-spy (stackdump.py); ``status`` adds, for a running app,
each rank's time since its last progress, a stall message when no rank progressed for the
app's ``hang_timeout``, and the last dump the supervisor's watchdog wrote (watchdog.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainlaunch import store
from trainlaunch.errors import SchedulerError
from trainlaunch.schedulers.local.ranks import LocalRank, app_ranks, progress_rows
from trainlaunch.schedulers.local.watchdog import hang_options, read_record, stall_message, targets
from trainlaunch.specs import AppState, AppStatus
from trainlaunch.stackdump import dump
from trainlaunch.stacks import EXITED, RankStack

EXIT_CODE_WAIT_S = 2.0  # how long to wait for the record of a rank that exited mid-dump


def _ranks(path: Path, request: Mapping[str, Any]) -> list[LocalRank]:
    return app_ranks(path, request, store.read_json_or_none(path / "state.json"))


def dump_app(path: Path, request: Mapping[str, Any], native: bool = False) -> list[RankStack]:
    """Every rank's stack; a rank that exits meanwhile is shown exited, with its code."""
    ranks = _ranks(path, request)
    if not ranks:
        raise SchedulerError(
            f"no rank of {path.name} has started yet", hint="try again in a moment"
        )
    out = dump(targets(ranks), native)
    deadline = time.monotonic() + EXIT_CODE_WAIT_S
    while any(s.state == EXITED and s.exit_code is None for s in out):
        codes = {r.rank: r.exit_code for r in _ranks(path, request)}
        out = [
            dataclasses.replace(s, exit_code=codes.get(s.rank))
            if s.state == EXITED and s.exit_code is None
            else s
            for s in out
        ]
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return out


def with_stall(path: Path, request: Mapping[str, Any], status: AppStatus) -> AppStatus:
    """A RUNNING status whose message says it is stalled (when hang_timeout is set)."""
    if status.state != AppState.RUNNING:
        return status
    timeout, _ = hang_options(request.get("cfg") or {})
    if timeout is None:
        return status
    msg = stall_message(_ranks(path, request), timeout, time.time())
    if not msg:
        return status
    return dataclasses.replace(status, msg=f"{msg}; {status.msg}" if status.msg else msg)


def hang_metadata(path: Path, request: Mapping[str, Any], status: AppStatus) -> dict[str, Any]:
    """``progress`` (running apps: per rank) and ``hang`` (the watchdog's last record)."""
    meta: dict[str, Any] = {}
    if status.state == AppState.RUNNING:
        timeout, _ = hang_options(request.get("cfg") or {})
        ranks, now = _ranks(path, request), time.time()
        meta["progress"] = progress_rows(ranks, now, timeout)
        meta["stall"] = stall_message(ranks, timeout, now)
    rec = read_record(path)
    if rec is not None:
        meta["hang"] = rec
    return meta


__all__ = ["dump_app", "hang_metadata", "with_stall"]
