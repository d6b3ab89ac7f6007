"""`trainlaunch stack` on the real Slurm cluster: ranks of both nodes, dumped through srun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.slurm.conftest import run_app, wait_for
from trainlaunch.schedulers.slurm.backend import SlurmScheduler
from trainlaunch.specs import AppState

REPO = Path(__file__).resolve().parents[2]
SILENT = REPO / "tests" / "fixtures" / "ddp" / "silent.py"


def test_stack_of_a_two_node_job_shows_ranks_from_both_nodes(
    slurm: SlurmScheduler, two_nodes: None
) -> None:
    from components.dist import ddp

    app = ddp(str(SILENT), nnodes="2", nproc_per_node="2", env={"EXIT_RANK": "3"})
    job_id = run_app(slurm, app)
    role = app.roles[0].name
    wait_for(
        slurm,
        job_id,
        lambda st: (
            st.state == AppState.RUNNING
            and sum("started" in ln for k in (0, 1) for ln in slurm.log_iter(job_id, role, k)) == 4
        ),
    )
    env = {**os.environ, "TRAINLAUNCH_CONFIG": "", "PYTHONPATH": str(REPO)}
    handle = f"slurm://trainlaunch/{job_id}"
    cmd = [sys.executable, "-m", "trainlaunch", "stack"]
    proc = subprocess.run(
        [*cmd, "--json", handle], capture_output=True, text=True, env=env, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    ranks = {r["rank"]: r for r in doc["ranks"]}
    assert sorted(ranks) == [0, 1, 2, 3]
    assert [ranks[r]["host"] for r in range(4)] == ["n1", "n1", "n2", "n2"]
    assert ranks[3]["state"] == "exited" and ranks[3]["exit_code"] == 0
    (running,) = [g for g in doc["groups"] if g["state"] == "running"]
    assert running["ranks"] == [0, 1, 2] and running["hosts"] == ["n1", "n2"]
    assert running["headline"].startswith("<module> at silent.py:")
    text = subprocess.run(
        [*cmd, "--summary", handle], capture_output=True, text=True, env=env, timeout=180
    )
    assert text.stdout.splitlines() == [
        "rank 3: exited with code 0",
        f"ranks 0-2: {running['headline']}",
    ], text
    # stragglers: status shows each rank's time since its last output
    status = subprocess.run(
        [sys.executable, "-m", "trainlaunch", "status", "--json", handle],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    rows = {p["rank"]: p for p in json.loads(status.stdout)["progress"]}
    assert sorted(rows) == [0, 1, 2, 3]
    assert all(rows[r]["running"] and rows[r]["idle_s"] >= 0 for r in (0, 1, 2))
    assert not rows[3]["running"] and rows[3]["exit_code"] == 0
    slurm.cancel(job_id)


def _watchdog_record(job_dir: Path) -> dict | None:
    path = job_dir / "watchdog.json"
    return json.loads(path.read_text()) if path.exists() else None


def test_hang_watchdog_dumps_every_node_then_requeues_then_stops(
    slurm: SlurmScheduler, two_nodes: None
) -> None:
    from components.dist import ddp

    app = ddp(str(SILENT), nnodes="2", nproc_per_node="2", max_retries=1)
    job_id = run_app(slurm, app, {"hang_timeout": 3, "on_hang": "restart"})
    job_dir = Path(slurm.describe(job_id).metadata["job_dir"])
    first = wait_for(slurm, job_id, lambda st: st.num_restarts == 1)
    assert first.num_restarts == 1
    st = wait_for(slurm, job_id)  # the second hang finds no restart left: scancel
    assert st.state == AppState.CANCELLED and st.num_restarts == 1
    assert st.msg.startswith("hung: no progress from any rank for ")
    assert st.msg.endswith(f"cancelled by the hang watchdog; stacks in {job_dir}/hang-2.txt")
    rec = _watchdog_record(job_dir)
    assert rec is not None and rec["hangs"] == 2 and rec["action"] == "stop"
    assert [s.split(" at ")[0] for s in rec["summary"]] == ["ranks 0-3: <module>"]
    assert "[n1, n2]" in (job_dir / "hang-1.txt").read_text()
    assert json.loads((job_dir / "hang-2.json").read_text())["groups"][0]["hosts"] == ["n1", "n2"]
    hang = slurm.describe(job_id).hang
    assert hang is not None and hang["action"] == "stop"
