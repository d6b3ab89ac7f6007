"""The hang watchdog of a Slurm job: started by the batch script when ``hang_timeout`` is set.

``python -m trainlaunch.schedulers.slurm.watchdog JOB_DIR TIMEOUT ON_HANG RETRIES BATCH_PID``
runs on the batch node next to the batch script and ends with it. It runs the one hang
watchdog (stacks/watchdog.py) once a second on the job as the job dir (a shared file system)
shows it: every dist.ddp replica's ``agent.json`` and each rank's output, metrics and heartbeat
files. Stacks are dumped in one ``srun --overlap`` step (as ``trainlaunch stack``), into the
job dir with the record; ``stop`` is ``scancel`` and ``restart`` is ``scontrol requeue`` (a
Slurm restart, while the job's restarts, as ``status`` counts them, are below RETRIES; else
stop). Torch-free.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainlaunch import settings
from trainlaunch.node import processes
from trainlaunch.node.agent_record import read_agent_state
from trainlaunch.schedulers.slurm.attempts import note_hang, num_restarts
from trainlaunch.schedulers.slurm.render import STATUS_FILE
from trainlaunch.schedulers.slurm.stacks import dump_targets
from trainlaunch.schedulers.slurm.status import read_kv
from trainlaunch.stacks import watchdog
from trainlaunch.stacks.dump import Target
from trainlaunch.stacks.progress import RankProgress, agent_ranks
from trainlaunch.stacks.values import RankStack
from trainlaunch.values import frozen


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


def job_ranks(job_dir: Path) -> list[RankProgress]:
    """Every rank the node agents of the job dir recorded, with the node it runs on."""
    env = {
        settings.METRICS_PATH: str(job_dir / "metrics") + "/",  # the default metrics path
        settings.HEARTBEAT_PATH: heartbeat_template(str(job_dir)),
    }
    out: list[RankProgress] = []
    for role, k, rdir in _replica_dirs(job_dir):
        agent = read_agent_state(str(rdir))
        kv = read_kv(rdir / STATUS_FILE) or {}
        live = bool(agent) and agent.get("state") == "RUNNING" and "exit" not in kv  # type: ignore[union-attr]
        start = float(kv.get("start") or 0.0)
        host = kv.get("host", "")
        out.extend(agent_ranks(agent, role, k, env, start, live, False, host=host))
    return sorted(out, key=lambda r: r.rank)


def _run(argv: list[str], check: bool = False, timeout: float = 120.0) -> Any:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=check)
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(argv, 1, "", str(e))


def _restart_count() -> int:
    return int(os.environ.get("SLURM_RESTART_COUNT") or 0)


@frozen
class BatchJob:
    """One Slurm job, as its job dir shows it (a stacks.watchdog.WatchedApp)."""

    job_dir: Path
    job_id: str
    retries: int  # the job's max_retries

    @property
    def record_dir(self) -> Path:
        """The job dir: ``status`` reads watchdog.json there."""
        return self.job_dir

    @property
    def dump_dir(self) -> Path:
        """The job dir, next to the record."""
        return self.job_dir

    def ranks(self) -> list[RankProgress]:
        """Every dist.ddp rank the job dir records."""
        return job_ranks(self.job_dir)

    def dump(self, targets: list[Target]) -> list[RankStack]:
        """py-spy on every node at once: one srun --overlap step."""
        return dump_targets(self.job_id, targets, sys.executable, False, _run)

    def restarts_left(self) -> bool:
        """The job's restarts (status's count: not its requeues) are below its max_retries."""
        return num_restarts(self.job_dir) < self.retries

    def restart(self, hang: watchdog.Hang) -> None:
        """``scontrol requeue``: the attempt history says why this attempt ended (and counts
        the restart; when it cannot, ``scancel``, so that restarts never go on unbounded)."""
        if note_hang(self.job_dir, _restart_count()):
            _run(["scontrol", "requeue", self.job_id])
        else:
            self.stop(hang)

    def stop(self, hang: watchdog.Hang) -> None:
        """``scancel``: the job ends CANCELLED; status says it hung (slurm/stacks.py)."""
        _run(["scancel", self.job_id])


def watch(job_dir: Path, timeout: float, on_hang: str, retries: int, batch_pid: int) -> int:
    """Poll until the batch script ends (or the watchdog stopped/requeued the job)."""
    job = BatchJob(job_dir, os.environ.get("SLURM_JOB_ID", ""), retries)
    batch_ticks = processes.start_ticks(batch_pid)  # a reused pid is not the batch script
    watchdog.watch(
        watchdog.Watchdog(job, timeout, on_hang),
        lambda: processes.same_process_alive(batch_pid, batch_ticks),
    )
    return 0


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


__all__ = ["BatchJob", "job_ranks", "main", "watch"]
