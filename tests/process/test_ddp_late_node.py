"""A node of a static per-node recipe that is late: the others say so, once, and `status` too.

Issue 22 #10: `trainlaunch torchrun --nnodes 2 --node-rank 0 ...` whose other node was late
waited in silence (11 min). Each test starts one node, waits for its line (polling its output
with a deadline), checks `status`, and only then starts the other node: the job completes
with real gloo ranks and the waiting node says when the wait ended.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI, wait_until
from tests.process.test_torchrun_launcher_port import free_port

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ddp"
DROPIN = [sys.executable, "-m", "trainlaunch", "torchrun"]

pytestmark = pytest.mark.slow  # two real gloo nodes, and 5 s before the first line


def _recipe(port: int, node_rank: int, out: Path) -> list[str]:
    flags = ["--nnodes", "2", "--node-rank", str(node_rank), "--master-addr", "127.0.0.1"]
    flags += ["--master-port", str(port), "--nproc-per-node", "1"]
    return [*flags, str(FIXTURES / "allreduce.py"), str(out)]


def _worlds(out: Path) -> list[tuple[int, int]]:
    docs = [json.loads((out / str(r)).read_text()) for r in range(2)]
    return [(d["rank"], d["world"]) for d in docs]


def test_node_0_of_a_dropin_recipe_says_it_waits_for_node_1(cli: CLI, tmp_path: Path) -> None:
    port, out = free_port(), tmp_path / "out"
    out.mkdir()
    err = tmp_path / "node0.err"
    line = f"node 0 of 2 waiting for 1 more node at 127.0.0.1:{port}"
    with err.open("w") as err_file:
        node0 = cli.popen("torchrun", *_recipe(port, 0, out), stderr=err_file)
        try:
            text = wait_until(
                lambda: line in err.read_text() and err.read_text(),
                timeout=90,
                what="node 0's waiting line",
            )
            assert text.count(line) == 1, text  # once, not a line per second
            handle = text.split("trainlaunch: ", 1)[1].split()[0]
            shown = cli("status", handle, check=True).stdout
            assert f"waiting:  {line}" in shown, shown
            doc = cli.status(handle)
            assert doc["waiting"]["line"] == line and doc["waiting"]["missing"] == [1], doc
            node1 = subprocess.run(
                [*DROPIN, *_recipe(port, 1, out)],
                capture_output=True,
                text=True,
                env=cli.env,
                cwd=cli.cwd,
                timeout=180,
            )
            assert node1.returncode == 0, node1.stderr
            assert node0.wait(timeout=180) == 0, err.read_text()
        finally:
            if node0.poll() is None:
                node0.kill()
    assert _worlds(out) == [(0, 2), (1, 2)]
    text = err.read_text()
    assert "[trainlaunch] node 0 of 2: all 2 nodes joined (after " in text, text
    assert "waiting" not in node1.stderr, node1.stderr  # node 0 was there: node 1 said nothing
    assert cli.status(handle)["waiting"] is None  # over: status no longer says so


def test_node_1_through_run_dist_ddp_says_it_waits_for_node_0(cli: CLI, tmp_path: Path) -> None:
    port, out = free_port(), tmp_path / "out"
    out.mkdir()
    handle = cli.run("dist.ddp", *_recipe(port, 1, out))
    line = f"node 1 of 2 waiting for node 0 at 127.0.0.1:{port} (connection refused)"
    wait_until(
        lambda: line in cli("logs", handle).stdout,
        timeout=90,
        what="node 1's waiting line",
    )
    doc = cli.status(handle)
    assert doc["state"] == "RUNNING" and doc["waiting"]["line"] == line, doc
    assert doc["waiting"]["missing"] == [0]
    node0 = cli("run", "--wait", "dist.ddp", *_recipe(port, 0, out), timeout=180)
    assert node0.returncode == 0, node0.stderr
    assert cli.wait(handle, timeout=180)["state"] == "SUCCEEDED"
    assert _worlds(out) == [(0, 2), (1, 2)]
    logs = cli("logs", handle, check=True).stdout
    assert logs.count("waiting for node 0") == 1, logs
    assert f"node 1 of 2: reached node 0 at 127.0.0.1:{port} (after " in logs, logs
    assert "waiting" not in cli("logs", node0.stdout.strip()).stdout
