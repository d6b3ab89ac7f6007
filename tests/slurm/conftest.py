"""Fixtures for tests against a real Slurm cluster (scripts/slurm-dev-cluster start).

They run whenever `sinfo` answers and skip, saying why, when no cluster does; with
TRAINLAUNCH_REQUIRE_SLURM=1 (CI) a missing cluster is a failure instead. Job dirs live under
pytest's temporary directory: on a real multi-host cluster run pytest with
--basetemp=<a directory every node can see>.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainlaunch import settings
from trainlaunch.schedulers import get_scheduler
from trainlaunch.schedulers.slurm.backend import SlurmScheduler
from trainlaunch.specs import AppDef, AppStatus

JOB_TIMEOUT_S = 120.0  # generous: the 2-core CI machine also runs torch jobs


def cluster_nodes() -> tuple[int, str]:
    """(number of nodes that answer, '') or (0, why there is no cluster)."""
    if shutil.which("sinfo") is None:
        return 0, "sinfo not found: no Slurm here (scripts/slurm-dev-cluster start makes one)"
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, timeout=15
        )
    except subprocess.TimeoutExpired:
        return 0, "sinfo did not answer within 15 s"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return 0, f"no Slurm cluster answers (sinfo: {last})"
    up = {
        ln.split()[0]
        for ln in proc.stdout.splitlines()
        if ln.split()[-1].rstrip("*~#") in ("idle", "mix", "alloc", "comp")
    }
    return len(up), "" if up else "the Slurm cluster has no usable node"


@pytest.fixture(scope="session")
def slurm_nodes() -> int:
    """How many nodes the cluster has (skip, or fail under TRAINLAUNCH_REQUIRE_SLURM)."""
    n, why = cluster_nodes()
    if not n:
        if os.environ.get("TRAINLAUNCH_REQUIRE_SLURM"):
            pytest.fail(f"Slurm is required here but unavailable: {why}")
        pytest.skip(why)
    return n


@pytest.fixture
def two_nodes(slurm_nodes: int) -> None:
    """Tests that spread replicas over 2 nodes."""
    if slurm_nodes < 2:
        pytest.skip(f"needs 2 Slurm nodes, the cluster has {slurm_nodes}")


@pytest.fixture
def slurm(
    slurm_nodes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SlurmScheduler]:
    """The backend as the registry makes it, with a private trainlaunch home."""
    monkeypatch.setenv(settings.HOME, str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    sched = get_scheduler("slurm", "trainlaunch")
    yield sched
    # never leave a job holding the nodes for the next test: cancel what this test submitted
    ids = [p.stem for p in (tmp_path / "home" / "slurm" / "index").glob("*.json")]
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, timeout=30)


def run_app(sched: SlurmScheduler, app: AppDef, cfg: dict | None = None) -> str:
    """Dry-run and submit; the job id."""
    return sched.schedule(sched.submit_dryrun(app, cfg or {}))


def wait_for(
    sched: SlurmScheduler, job_id: str, done: object = None, timeout: float = JOB_TIMEOUT_S
) -> AppStatus:
    """Poll describe until done(status) (default: terminal); fail after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        st = sched.describe(job_id).status
        if done(st) if callable(done) else st.is_terminal:
            return st
        if time.monotonic() > deadline:
            raise AssertionError(
                f"slurm job {job_id} still {st.state.name} after {timeout}s: {st.msg}"
            )
        time.sleep(0.1)


def run_cli(cli: Any, *args: str) -> str:
    """`trainlaunch run -s slurm ARGS` through the CLI; the handle."""
    handle = cli("run", "-s", "slurm", *args, check=True).stdout.strip()
    assert handle.startswith("slurm://"), handle
    return handle


def wait_cli(cli: Any, handle: str, timeout: float = 240.0) -> dict[str, Any]:
    """Poll `status --json` through the CLI until the app is terminal; its document."""
    from tests.conftest import wait_until

    return wait_until(  # type: ignore[no-any-return]
        lambda: (s := cli.status(handle))["is_terminal"] and s,
        timeout=timeout,
        interval=1.0,
        what=f"{handle} to end",
    )
