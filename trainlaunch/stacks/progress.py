"""Per-rank progress, read by the hang watchdog and ``status`` on the file-based backends
(local, Slurm): stragglers and hangs.

A rank's progress is the newest modification time of its output files, its metrics file and
its heartbeat file (``trainlaunch.rank.heartbeat()``), never older than the start of its
current attempt. A dist.ddp replica is a node agent: its ``agent.json`` names each worker's
global rank, pid and exit code, and each rank writes ``<attempt_dir>/<local_rank>/*.log``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainlaunch import settings
from trainlaunch.diagnosis.values import duration
from trainlaunch.node import processes
from trainlaunch.node.exits import shell_code
from trainlaunch.stacks.values import rank_list
from trainlaunch.values import frozen

NO_PROGRESS = "no output or metrics from any rank"


@frozen
class RankProgress:
    """One rank, as the records describe it now."""

    rank: int
    role: str
    replica_id: int
    pid: int | None
    ticks: int | None
    running: bool  # the process is (still) the live one recorded
    exit_code: int | None
    started: float  # progress baseline: when this rank's current attempt began
    files: tuple[Path, ...]  # output, metrics and heartbeat files
    host: str = ""  # the node it runs on, where the records say ('': this machine)
    recorder: str = ""  # its Flight Recorder socket, when the agent turned it on

    def shown_life(self) -> bool:
        """Whether it showed a sign of life in this attempt (a line, a metric, a heartbeat):
        until then it is *starting* (import torch, loading) and the watchdog also counts its
        CPU time as progress (stacks/watchdog.py)."""
        return self.last_progress() > self.started

    def last_progress(self) -> float:
        """The latest of the attempt's start and any progress file's modification time."""
        last = self.started
        for f in self.files:
            try:
                last = max(last, f.stat().st_mtime)
            except OSError:
                continue
        return last


def rank_file(template: str | None, rank: int) -> Path | None:
    """A per-rank file from a path template (``{rank}``; a directory gets rank{rank}.jsonl)."""
    if not template:
        return None
    path = template
    if path.endswith("/"):
        path += settings.DEFAULT_METRICS_FILE
    return Path(path.replace("{rank}", str(rank)))


def extra_files(env: Mapping[str, str], rank: int) -> list[Path]:
    """The rank's metrics and heartbeat files named by the injected settings."""
    files = [rank_file(env.get(settings.METRICS_PATH), rank)]
    files.append(rank_file(env.get(settings.HEARTBEAT_PATH), rank))
    return [f for f in files if f is not None]


def agent_ranks(
    agent: Mapping[str, Any] | None,
    role: str,
    replica_id: int,
    env: Mapping[str, str],
    started: float,
    live: bool,
    check_pids: bool = True,
    host: str = "",
) -> list[RankProgress]:
    """The workers a node agent recorded (check_pids: only where /proc shows this host's)."""
    if not agent or not agent.get("attempt_dir"):
        return []
    adir = Path(agent["attempt_dir"])
    out = []
    for w in agent.get("workers", []):
        if not isinstance(w, Mapping) or not isinstance(w.get("rank"), int):
            continue
        rank, lr, pid = w["rank"], w.get("local_rank", 0), w.get("pid")
        code = shell_code(w.get("exit_code"))
        running = live and code is None
        if running and check_pids:
            running = processes.same_process_alive(pid, w.get("ticks"))
        try:
            begun = (adir / str(lr)).stat().st_mtime  # created when the attempt started
        except OSError:
            begun = float(agent.get("updated") or 0.0)
        out.append(
            RankProgress(
                rank=rank,
                role=role,
                replica_id=replica_id,
                pid=pid,
                ticks=w.get("ticks"),
                running=running,
                exit_code=code,
                started=max(started, begun),
                files=(
                    adir / str(lr) / "stdout.log",
                    adir / str(lr) / "stderr.log",
                    *extra_files(env, rank),
                ),
                host=host,
                recorder=str(w.get("recorder") or ""),
            )
        )
    return out


def stall_message(ranks: Sequence[RankProgress], timeout: float | None, now: float) -> str:
    """``stalled for 12m: ...`` when no running rank progressed for timeout; per-rank if some."""
    # a starting rank (no sign of life yet) is the watchdog's to judge: its CPU time counts
    running = [r for r in ranks if r.running and r.shown_life()]
    if timeout is None or not running:
        return ""
    idle = {r.rank: now - r.last_progress() for r in running}
    stalled = [k for k, v in idle.items() if v >= timeout]
    if len(stalled) == len(running):
        return f"stalled for {duration(min(idle.values()))}: {NO_PROGRESS}"
    if stalled:
        worst = max(idle[k] for k in stalled)
        who = ("rank " if len(stalled) == 1 else "ranks ") + rank_list(stalled)
        return f"{who} without progress for {duration(worst)} (others progressing)"
    return ""


def progress_rows(
    ranks: Sequence[RankProgress], now: float, timeout: float | None = None
) -> list[dict[str, Any]]:
    """Per rank: state and seconds since its last progress (status's straggler view)."""
    rows = []
    for r in ranks:
        last = r.last_progress()
        idle = max(0.0, now - last)
        starting = r.running and not r.shown_life()
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
                "starting": starting,  # no output, metric or heartbeat yet in this attempt
                "stalled": bool(
                    r.running and not starting and timeout is not None and idle >= timeout
                ),
            }
        )
    return rows


__all__ = [
    "RankProgress",
    "agent_ranks",
    "duration",
    "extra_files",
    "progress_rows",
    "rank_file",
    "stall_message",
]
