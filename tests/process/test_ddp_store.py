"""The c10d store outlives rank 0, as under torchrun (its agent hosts the store).

tests/fixtures/ddp/store_after_exit.py: rank 0 sets a key and exits at once; rank 1 waits
until rank 0's process is gone, then reads the key. Real torchrun and trainlaunch run the
same script with the same shape of world: 2 ranks on one node, and 2 nodes x 1 rank.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI
from trainlaunch.node.processes import reserve_port

pytest.importorskip("torch")  # the oracle is real torchrun

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ddp"
SCRIPT = FIXTURES / "store_after_exit.py"
READ = "store read after rank 0 exited: hello"


def torchrun(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", *argv, str(SCRIPT)],
        cwd=FIXTURES,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(procs: list[subprocess.Popen[str]]) -> str:
    out = ""
    for p in procs:
        text, _ = p.communicate(timeout=180)
        assert p.returncode == 0, text
        out += text
    return out


def trainlaunch(cli: CLI, *argv: str) -> str:
    """`run dist.ddp ...` until it ends, then the logs of every node."""
    handle = cli.run("dist.ddp", *argv, str(SCRIPT))
    st = cli.wait(handle, timeout=180)
    logs = cli("logs", "--raw", handle, check=True).stdout
    assert st["state"] == "SUCCEEDED", f"{st}\n{logs}"
    return logs


@pytest.mark.slow  # 9 s serially on a busy 2-core machine (--durations)
def test_single_node_two_ranks(cli: CLI) -> None:
    assert READ in finish([torchrun("--nproc-per-node", "2")])
    assert READ in trainlaunch(cli, "--nproc", "2")


@pytest.mark.slow
def test_two_nodes_one_rank_each(cli: CLI) -> None:
    port = str(reserve_port())
    nodes = [
        torchrun(
            "--nnodes",
            "2",
            "--nproc-per-node",
            "1",
            "--node-rank",
            str(n),
            "--master-addr",
            "localhost",
            "--master-port",
            port,
        )  # fmt: skip
        for n in (0, 1)
    ]
    assert READ in finish(nodes)
    # the local backend runs both nodes: node 0's agent serves until node 1's rank is done
    assert READ in trainlaunch(cli, "-j", "2x1")
