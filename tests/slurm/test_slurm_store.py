"""The c10d store of a two-node dist.ddp job on the real cluster (issue 23, item 1).

Node 0's agent listens on every interface there (the other node's ranks connect from
another host), on a port chosen when the job starts (not derived from the job id); a local
process of another user is refused (root runs one as uid 65534), the job's ranks are served.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.fixtures.store.client import python_for
from tests.slurm.conftest import run_app, wait_for
from trainlaunch.schedulers.slurm.backend import SlurmScheduler
from trainlaunch.specs import AppState

pytestmark = pytest.mark.slurm
PROBE = Path(__file__).resolve().parents[1] / "fixtures" / "ddp" / "store_probe.py"
OTHER_UID = 65534


def test_two_nodes_store_refuses_another_user(slurm: SlurmScheduler, two_nodes: None) -> None:
    from trainlaunch.components.dist import ddp

    python = python_for(OTHER_UID) if os.geteuid() == 0 else None
    if python is None:
        pytest.skip("a second local user needs root and a python it may run")
    env = {"OTHER_UID": str(OTHER_UID), "OTHER_PYTHON": python}
    app = ddp(str(PROBE), nnodes="2", nproc_per_node="1", env=env)
    job_id = run_app(slurm, app)
    st = wait_for(slurm, job_id)
    role = app.roles[0].name
    lines = [line for k in (0, 1) for line in slurm.log_iter(job_id, role, k)]
    assert st.state == AppState.SUCCEEDED, (st, lines)
    text = "\n".join(lines)
    assert text.count("own: pong") == 2, text
    assert text.count("other user: 0 bytes") == 2, text
    assert f"refused a c10d store connection from uid {OTHER_UID}" in text, text
    (port,) = set(re.findall(r"master \S+ (\d+)", text))  # both nodes: one port
    assert int(port) != 20000 + int(job_id) % 10000, "the port is derived from the job id"
