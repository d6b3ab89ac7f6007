"""The preflight on the real two-node cluster: the nodes' agents check each other in the job's
own step before any rank starts; a refused job names the node; the exclusion requeues the job
without it (the two emulated nodes share this host, so a node-specific environment comes from
an interpreter wrapper that looks at SLURMD_NODENAME, as a node's own profile would)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slurm.conftest import JOB_TIMEOUT_S
from trainlaunch import settings
from trainlaunch.components.dist import ddp
from trainlaunch.runner import get_runner
from trainlaunch.schedulers.slurm.backend import SlurmScheduler
from trainlaunch.specs import AppState, AppStatus

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
# leaves with os._exit once it printed, as tests/fixtures/ddp/train_ddp.py: gloo's threads can
# abort the interpreter's teardown (SIGABRT, "terminate called without an active exception";
# 2 runs in 10 of the exclusion test on a loaded machine)
ALLREDUCE = """\
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([1.0])
dist.all_reduce(t)
print("rank=%s node=%s sum=%s" % (os.environ["RANK"], os.environ["SLURMD_NODENAME"], t.item()))
dist.destroy_process_group()
sys.stdout.flush()
os._exit(0)
"""


def wrapper(directory: Path, name: str, condition: str, export: str) -> str:
    """An interpreter that exports something when condition (shell) holds on its node."""
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(
        f'#!/bin/sh\nif {condition}; then export {export}; fi\nexec {sys.executable} "$@"\n'
    )
    path.chmod(0o755)
    return str(path)


def run(nodes: int, cfg: dict[str, object], **kw: object) -> tuple[str, AppStatus]:
    """Submit allreduce.py as dist.ddp on nodes x 1 with a preflight; (handle, final status)."""
    Path("allreduce.py").write_text(ALLREDUCE)
    env = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", **kw.pop("env", {})}  # type: ignore[dict-item]
    app = ddp("allreduce.py", nnodes=str(nodes), env=env, **kw)  # type: ignore[arg-type]
    with get_runner() as runner:
        handle = runner.run(app, "slurm", {"preflight": True, "preflight_timeout": 60.0, **cfg})
        return handle, runner.wait(handle, timeout=JOB_TIMEOUT_S * 2)


def logs(handle: str, nodes: int = 2) -> str:
    with get_runner() as runner:
        return "\n".join(
            line for k in range(nodes) for line in runner.log_lines(handle, "allreduce", k)
        )


def messages(st: AppStatus) -> str:
    """What status shows of the failed replicas (their root cause)."""
    return "\n".join(r.message for r in st.replicas() if r.state == AppState.FAILED)


def test_a_clean_preflight_passes_then_the_ranks_run(
    slurm: SlurmScheduler, two_nodes: None
) -> None:
    handle, st = run(2, {})
    text = logs(handle)
    assert st.state == AppState.SUCCEEDED, (st, text)
    assert text.count("preflight passed: 2 nodes in") == 2  # both agents say so
    assert text.index("preflight passed") < text.index("rank=0")
    assert "rank=1 node=n2 sum=2.0" in text
    with get_runner() as runner:
        recorded = runner.describe_app(handle).preflight
    assert recorded["ok"] and recorded["names"] == {"0": "n1", "1": "n2"}


def test_n2_with_a_shadowing_pythonpath_is_refused_and_named(
    slurm: SlurmScheduler, two_nodes: None, tmp_path: Path
) -> None:
    old = tmp_path / "old"
    (old / "torch").mkdir(parents=True)
    (old / "torch" / "__init__.py").write_text('__version__ = "2.12.0"\n')
    python = wrapper(
        tmp_path / "bin", "py", '[ "$SLURMD_NODENAME" = n2 ]', f"PYTHONPATH={old}:{REPO}"
    )
    handle, st = run(2, {"preflight_exclude_bad_nodes": True}, python=python)
    assert st.state == AppState.FAILED and st.exit_code == settings.PREFLIGHT_EXIT_CODE, st
    why = messages(st)
    assert "n2: torch 2.12.0 where n1 has " in why and f"(PYTHONPATH={old})" in why, why
    assert "rank=" not in logs(handle)  # no rank started
    job_dir = Path(tmp_path / "home" / "slurm" / "jobs" / handle.rsplit("/", 1)[1])
    batch = (job_dir / "batch.log").read_text()
    # the job needs both nodes of this 2-node cluster: it cannot run without n2
    assert "the preflight failed on n2; not requeueing without it: partition" in batch, batch
    assert (job_dir / "allreduce" / "0" / "preflight.exclude").read_text() == "n2\n"


def test_a_held_rendezvous_port_names_node_0(slurm: SlurmScheduler, two_nodes: None) -> None:
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        port = holder.getsockname()[1]
        handle, st = run(2, {"rdzv_port": port})
    assert st.state == AppState.FAILED and st.exit_code == settings.PREFLIGHT_EXIT_CODE, st
    text = messages(st)
    assert f"node 0 (n1) cannot listen on port {port}" in text, text
    assert f"held by pid {os.getpid()}" in text
    # n2 would say it cannot reach n1's store, but srun ends the step at n1's exit first


def test_a_refused_node_is_excluded_and_the_job_runs_elsewhere(
    slurm: SlurmScheduler, two_nodes: None, tmp_path: Path
) -> None:
    # whichever node the first attempt lands on fails its preflight (an interface name it lacks)
    python = wrapper(
        tmp_path / "bin",
        "py",
        '[ "${SLURM_RESTART_COUNT:-0}" = 0 ]',
        "NCCL_SOCKET_IFNAME=nosuch0",
    )
    handle, st = run(1, {"preflight_exclude_bad_nodes": True}, python=python, nproc_per_node="2")
    job = handle.rsplit("/", 1)[1]
    job_dir = tmp_path / "home" / "slurm" / "jobs" / job
    seen = "\n".join(  # what a failure shows: the status, the batch log, the attempts
        [
            repr(st),
            *(f.read_text() for f in (job_dir / "batch.log", job_dir / "attempts") if f.exists()),
        ]
    )
    assert st.state == AppState.SUCCEEDED, seen
    first, second = st.attempts
    bad = first.reason.split("preflight failed on ", 1)[1].split()[0]
    assert first.reason == f"preflight failed on {bad} (excluded, requeued)", seen
    assert st.num_requeues == 1 and second.reason == "succeeded", seen
    # the batch script confirmed the exclusion (it reads ExcNodeList back) before it ended
    assert f"attempt=0 excluded={bad}\nattempt=0 exclusion=ok\n" in seen, seen
    assert f"Slurm excludes {bad} from the next attempt (ExcNodeList={bad})" in seen, seen
    shown = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True)
    assert shown.returncode == 0 and f"ExcNodeList={bad}" in shown.stdout, (shown, seen)
    other = {"n1": "n2", "n2": "n1"}[bad]
    assert f"node={other}" in logs(handle, nodes=1), seen
