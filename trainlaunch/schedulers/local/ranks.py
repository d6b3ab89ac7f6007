"""The ranks of a local app: pid, state and the files whose growth means progress.

A dist.ddp replica is a node agent: its workers (global rank, pid, exit code) are in its
``agent.json`` and each rank's output goes to ``<attempt_dir>/<local_rank>/{stdout,stderr}.log``.
Any other replica is one rank (numbered in plan order). Besides output, a rank shows progress
through its metrics file and its heartbeat file (``trainlaunch.rank.heartbeat()``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainlaunch import settings, store
from trainlaunch.agent.state import read_agent_state


@dataclasses.dataclass(frozen=True)
class LocalRank:
    """One rank of a local app, as the records describe it now."""

    rank: int
    role: str
    replica_id: int
    pid: int | None
    ticks: int | None
    running: bool  # the process is (still) the live one recorded
    exit_code: int | None
    started: float  # progress baseline: when this rank's current attempt began
    files: tuple[Path, ...]  # output, metrics and heartbeat files

    def last_progress(self) -> float:
        """The latest of the attempt's start and any progress file's modification time."""
        last = self.started
        for f in self.files:
            try:
                last = max(last, f.stat().st_mtime)
            except OSError:
                continue
        return last


def _rank_file(template: str | None, rank: int) -> Path | None:
    """A per-rank file from a path template (``{rank}``; a directory gets rank{rank}.jsonl)."""
    if not template:
        return None
    path = template
    if path.endswith("/"):
        path += settings.DEFAULT_METRICS_FILE
    return Path(path.replace("{rank}", str(rank)))


def _extra_files(env: Mapping[str, str], rank: int) -> list[Path]:
    files = [_rank_file(env.get(settings.METRICS_PATH), rank)]
    files.append(_rank_file(env.get(settings.HEARTBEAT_PATH), rank))
    return [f for f in files if f is not None]


def _is_agent(plan: Mapping[str, Any]) -> bool:
    return "trainlaunch.agent" in list(plan.get("cmd", []))[1:3]


def _code(value: Any) -> int | None:
    """Popen's -N (killed by signal N) as the shell's 128+N."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return 128 - value if value < 0 else value


def app_ranks(
    app_dir: Path, request: Mapping[str, Any], state: Mapping[str, Any] | None
) -> list[LocalRank]:
    """Every rank known from the records, in rank order (agents' workers once they started)."""
    recs = {(r.get("role"), r.get("replica_id")): r for r in (state or {}).get("replicas", [])}
    out: list[LocalRank] = []
    for index, plan in enumerate(request.get("replicas", [])):
        rec = recs.get((plan["role"], plan["replica_id"]), {})
        log_dir = app_dir / plan["log_dir"]
        started = float(rec.get("started") or 0.0)
        live = rec.get("state") == "RUNNING" and store.same_process_alive(
            rec.get("pid"), rec.get("ticks")
        )
        if not _is_agent(plan):
            out.append(
                LocalRank(
                    rank=index,
                    role=plan["role"],
                    replica_id=plan["replica_id"],
                    pid=rec.get("pid"),
                    ticks=rec.get("ticks"),
                    running=live,
                    exit_code=_code(rec.get("exit_code")),
                    started=started,
                    files=(
                        log_dir / "stdout.log",
                        log_dir / "stderr.log",
                        *_extra_files(plan["env"], index),
                    ),
                )
            )
            continue
        out.extend(_agent_ranks(plan, rec, log_dir, started, live))
    out.sort(key=lambda r: r.rank)
    return out


def _agent_ranks(
    plan: Mapping[str, Any], rec: Mapping[str, Any], log_dir: Path, started: float, live: bool
) -> list[LocalRank]:
    agent = read_agent_state(str(log_dir))
    # a record left by an earlier start of this replica names dead workers: ignore it
    if not agent or agent.get("pid") != rec.get("pid") or not agent.get("attempt_dir"):
        return []
    adir = Path(agent["attempt_dir"])
    try:
        attempt_start = float(agent.get("updated") or 0.0)
    except (TypeError, ValueError):
        attempt_start = 0.0
    out = []
    for w in agent.get("workers", []):
        if not isinstance(w, Mapping) or not isinstance(w.get("rank"), int):
            continue
        rank, lr, pid = w["rank"], w.get("local_rank", 0), w.get("pid")
        code = _code(w.get("exit_code"))
        running = live and code is None and store.same_process_alive(pid, w.get("ticks"))
        try:
            begun = (adir / str(lr)).stat().st_mtime  # created when the attempt started
        except OSError:
            begun = attempt_start
        out.append(
            LocalRank(
                rank=rank,
                role=plan["role"],
                replica_id=plan["replica_id"],
                pid=pid,
                ticks=w.get("ticks"),
                running=running,
                exit_code=code,
                started=max(started, begun),
                files=(
                    adir / str(lr) / "stdout.log",
                    adir / str(lr) / "stderr.log",
                    *_extra_files(plan["env"], rank),
                ),
            )
        )
    return out


def progress_rows(
    ranks: Sequence[LocalRank], now: float, timeout: float | None = None
) -> list[dict[str, Any]]:
    """Per rank: state and seconds since its last progress (status's straggler view)."""
    rows = []
    for r in ranks:
        last = r.last_progress()
        idle = max(0.0, now - last)
        rows.append(
            {
                "rank": r.rank,
                "role": r.role,
                "replica_id": r.replica_id,
                "pid": r.pid,
                "running": r.running,
                "exit_code": r.exit_code,
                "last_progress": round(last, 3),
                "idle_s": round(idle, 1) if r.running else None,
                "stalled": bool(r.running and timeout is not None and idle >= timeout),
            }
        )
    return rows


__all__ = ["LocalRank", "app_ranks", "progress_rows"]
