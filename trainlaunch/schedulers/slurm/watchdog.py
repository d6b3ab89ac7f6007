"""The hang watchdog of a Slurm job: started by the batch script when ``hang_timeout`` is set.

``python -m trainlaunch.schedulers.slurm.watchdog JOB_DIR TIMEOUT ON_HANG RETRIES BATCH_PID``
runs on the batch node next to the batch script and ends with it. Once a second it reads the
job dir (a shared file system): every dist.ddp replica's ``agent.json`` and each rank's output,
metrics and heartbeat files. When no running rank made progress for TIMEOUT seconds it dumps
every rank's stack (one ``srun --overlap`` step, as ``trainlaunch stack``) into
``hang-<n>.{txt,json}``, records the hang in ``watchdog.json`` and applies ON_HANG: ``none``,
``stop`` (``scancel``) or ``restart`` (``scontrol requeue``: a Slurm restart, while the job's
restart count is below RETRIES; else stop). Torch-free.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainlaunch import settings, stacks, store
from trainlaunch.agent_record import read_agent_state
from trainlaunch.errors import StoreError
from trainlaunch.schedulers.progress import RankProgress, agent_ranks, duration
from trainlaunch.schedulers.slurm.attempts import note_hang
from trainlaunch.schedulers.slurm.render import STATUS_FILE
from trainlaunch.schedulers.slurm.stacks import dump_targets
from trainlaunch.schedulers.slurm.status import read_kv
from trainlaunch.stackdump import Target

WATCHDOG_FILE = "watchdog.json"
POLL_S = 1.0


def heartbeat_template(job_dir: str) -> str:
    """Where the ranks' heartbeat files go in the job dir."""
    return job_dir + "/heartbeat/rank{rank}"


def _replica_dirs(job_dir: Path) -> list[tuple[str, int, Path]]:
    out = []
    for agent in sorted(job_dir.glob("*/*/agent.json")):
        rdir = agent.parent
        if rdir.name.isdigit():
            out.append((rdir.parent.name, int(rdir.name), rdir))
    return out


def job_ranks(job_dir: Path) -> list[tuple[RankProgress, str]]:
    """(progress, host) of every rank the node agents of the job dir recorded."""
    env = {
        settings.METRICS_PATH: str(job_dir / "metrics") + "/",  # the default metrics path
        settings.HEARTBEAT_PATH: heartbeat_template(str(job_dir)),
    }
    out: list[tuple[RankProgress, str]] = []
    for role, k, rdir in _replica_dirs(job_dir):
        agent = read_agent_state(str(rdir))
        kv = read_kv(rdir / STATUS_FILE) or {}
        live = bool(agent) and agent.get("state") == "RUNNING" and "exit" not in kv  # type: ignore[union-attr]
        start = float(kv.get("start") or 0.0)
        host = kv.get("host", "")
        out.extend((r, host) for r in agent_ranks(agent, role, k, env, start, live, False))
    return sorted(out, key=lambda rh: rh[0].rank)


def _targets(ranks: Sequence[tuple[RankProgress, str]]) -> list[Target]:
    return [
        Target(
            rank=r.rank,
            pid=r.pid,
            host=host,
            role=r.role,
            replica_id=r.replica_id,
            exit_code=r.exit_code,
            ended=not r.running,
        )
        for r, host in ranks
    ]


def _run(argv: list[str], check: bool = False, timeout: float = 120.0) -> Any:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=check)
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(argv, 1, "", str(e))


def fire(
    job_dir: Path,
    job_id: str,
    ranks: Sequence[tuple[RankProgress, str]],
    idle: float,
    timeout: float,
    on_hang: str,
    retries: int,
) -> str:
    """Dump, record, act; return the action taken."""
    prev = store.read_json_or_none(job_dir / WATCHDOG_FILE) or {}
    n = int(prev.get("hangs") or 0) + 1
    taken = time.time()
    dumped = dump_targets(job_id, _targets(ranks), sys.executable, False, _run)
    groups = stacks.group(dumped)
    txt, js = job_dir / f"hang-{n}.txt", job_dir / f"hang-{n}.json"
    what = f"no output or metrics from any rank for {duration(idle)}"
    with contextlib.suppress(OSError, StoreError):
        txt.write_text(f"# {what}\n{stacks.render_text(groups)}\n", encoding="utf-8")
        store.write_json(js, {**stacks.document(dumped, taken), "idle_s": round(idle, 1)})
    restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
    action = on_hang
    if action == "restart" and restarts >= retries:
        action = "stop"
    rec = {
        "hangs": n,
        "at": taken,
        "idle_s": round(idle, 1),
        "timeout": timeout,
        "on_hang": on_hang,
        "action": action,
        "dump": str(txt),
        "dump_json": str(js),
        "summary": stacks.summary_lines(groups),
    }
    with contextlib.suppress(OSError, StoreError):
        store.write_json(job_dir / WATCHDOG_FILE, rec)
    print(f"trainlaunch watchdog: hung: {what}; action: {action}; stacks in {txt}", flush=True)
    if action == "restart":
        note_hang(job_dir, restarts)  # the attempt history says why it ended
        _run(["scontrol", "requeue", job_id])
    elif action == "stop":
        _run(["scancel", job_id])
    return action


def watch(job_dir: Path, timeout: float, on_hang: str, retries: int, batch_pid: int) -> int:
    """Poll until the batch script ends (or the watchdog stopped/requeued the job)."""
    job_id = os.environ.get("SLURM_JOB_ID", "")
    fired_at: float | None = None
    while _alive(batch_pid):
        time.sleep(POLL_S)
        ranks = job_ranks(job_dir)
        running = [r for r, _ in ranks if r.running]
        if not running:
            continue
        newest = max(r.last_progress() for r in running)
        idle = time.time() - newest
        if idle < timeout or fired_at == newest:
            continue
        fired_at = newest
        if fire(job_dir, job_id, ranks, idle, timeout, on_hang, retries) != "none":
            return 0
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv: Sequence[str]) -> int:
    """Entry point (see the module docstring)."""
    if len(argv) != 6:
        print(
            "usage: python -m trainlaunch.schedulers.slurm.watchdog "
            "JOB_DIR TIMEOUT ON_HANG RETRIES BATCH_PID",
            file=sys.stderr,
        )
        return 2
    return watch(Path(argv[1]), float(argv[2]), argv[3], int(argv[4]), int(argv[5]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))


__all__ = ["WATCHDOG_FILE", "fire", "job_ranks", "main", "watch"]
