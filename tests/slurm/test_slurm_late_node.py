"""A node late to a Slurm job's rendezvous: `status` says who waits for whom, as on the local
backend (issue 22 #10; agent/joins.py). Node n2's interpreter is held back by a wrapper until
the test's go file exists (a node whose image pull or file system is slow), so node 0's agent
waits for it; the job then completes and the line goes away."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.slurm.conftest import JOB_TIMEOUT_S
from trainlaunch.components.dist import ddp
from trainlaunch.runner import get_runner
from trainlaunch.schedulers.slurm.backend import SlurmScheduler
from trainlaunch.specs import AppState

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def test_status_shows_node_0_waiting_for_the_late_node(
    slurm: SlurmScheduler, two_nodes: None, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    late = tmp_path / "late-python"  # n2's interpreter starts once go exists
    late.write_text(
        f'#!/bin/sh\nif [ "$SLURMD_NODENAME" = n2 ]; then\n'
        f'  while [ ! -e {go} ]; do sleep 0.1; done\nfi\nexec {sys.executable} "$@"\n'
    )
    late.chmod(0o755)
    # node 0's rank runs until go too: its agent is up, waiting for node 1's
    Path("noop.py").write_text(
        f"import os, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.1)\n"
        "print('rank', os.environ['RANK'], 'ran')\n"
    )
    app = ddp("noop.py", nnodes="2", python=str(late), env={"PYTHONPATH": str(REPO)})
    with get_runner() as runner:
        handle = runner.run(app, "slurm", {})
        try:
            waiting = wait_until(
                lambda: runner.describe_app(handle).waiting,
                timeout=JOB_TIMEOUT_S,
                what="node 0's waiting record",
            )
            assert waiting["line"].startswith("node 0 of 2 waiting for 1 more node at "), waiting
            assert waiting["missing"] == [1], waiting
        finally:
            go.touch()
        st = runner.wait(handle, timeout=JOB_TIMEOUT_S)
        assert st is not None and st.state == AppState.SUCCEEDED, st
        assert runner.describe_app(handle).waiting is None
