"""The store a dist.ddp app's agent hosts, probed by one of its own ranks (issue 23, item 1).

Every node on this host (one node, or the local backend's nodes): the store listens on
loopback only, so another host cannot reach it; and a process of another local user (root
runs one as uid 65534) is refused, while the ranks are served.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import CLI
from tests.fixtures.store.client import non_loopback_address, python_for

PROBE = Path(__file__).resolve().parents[1] / "fixtures" / "ddp" / "store_probe.py"
OTHER_UID = 65534


def _probe(cli: CLI, *shape: str) -> str:
    env = []
    addr = non_loopback_address()
    if addr:
        env.append(f"OTHER_ADDR={addr}")
    python = python_for(OTHER_UID) if os.geteuid() == 0 else None
    if python:
        env += [f"OTHER_UID={OTHER_UID}", f"OTHER_PYTHON={python}"]
    argv = ["run", "--wait", "dist.ddp", *shape]
    if env:
        argv += ["--env", ",".join(env)]
    run = cli(*argv, str(PROBE), timeout=180)
    assert run.returncode == 0, run.stderr
    logs = cli("logs", "--raw", run.stdout.strip(), check=True).stdout
    assert "own: pong" in logs, logs
    if addr:
        assert "other interface: refused" in logs, logs
    if python:
        assert "other user: 0 bytes" in logs, logs
        assert f"refused a c10d store connection from uid {OTHER_UID}" in logs, logs
    return logs


def test_one_node(cli: CLI) -> None:
    logs = _probe(cli, "--nproc", "1")
    assert "master localhost" in logs or "master 127.0.0.1" in logs, logs


@pytest.mark.slow
def test_two_local_nodes(cli: CLI) -> None:
    """The local backend's nodes are all on this host: node 0's store is loopback too."""
    _probe(cli, "-j", "2x1")
