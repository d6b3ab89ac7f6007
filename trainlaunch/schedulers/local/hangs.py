"""What the local backend shows of hangs: stack dumps on request, stalls and stragglers.

``stack`` dumps every rank with py-spy (stacks/dump.py); ``status`` adds, for a running app,
each rank's time since its last progress, a stall message when no rank progressed for the
app's ``hang_timeout``, and the last dump the supervisor's watchdog wrote (stacks/watchdog.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainlaunch import store
from trainlaunch.errors import SchedulerError
from trainlaunch.specs import AppState, AppStatus
from trainlaunch.stacks.watchdog import hang_options, status_view, targets

if TYPE_CHECKING:  # the rank and stack modules are imported where ranks are read: the
    # backend imports this module on every `run`, which reads no rank
    from trainlaunch.schedulers.local.ranks import LocalRank
    from trainlaunch.stacks.values import RankStack

EXIT_CODE_WAIT_S = 2.0  # how long to wait for the record of a rank that exited mid-dump


def _ranks(path: Path, request: Mapping[str, Any]) -> list[LocalRank]:
    from trainlaunch.schedulers.local.ranks import app_ranks

    return app_ranks(path, request, store.read_json_or_none(path / "state.json"))


def dump_app(path: Path, request: Mapping[str, Any], native: bool = False) -> list[RankStack]:
    """Every rank's stack; a rank that exits meanwhile is shown exited, with its code."""
    from trainlaunch.stacks.dump import dump
    from trainlaunch.stacks.values import EXITED

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
    from trainlaunch.stacks.progress import stall_message

    msg = stall_message(_ranks(path, request), timeout, time.time())
    if not msg:
        return status
    return dataclasses.replace(status, msg=f"{msg}; {status.msg}" if status.msg else msg)


def hang_metadata(path: Path, request: Mapping[str, Any], status: AppStatus) -> dict[str, Any]:
    """``progress`` (running apps: per rank) and ``hang`` (the watchdog's last record)."""
    running = status.state == AppState.RUNNING
    return status_view(lambda: _ranks(path, request), request.get("cfg") or {}, path, running)


__all__ = ["dump_app", "hang_metadata", "with_stall"]
