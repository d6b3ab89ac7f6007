"""The preflight of two real node agents on this host (two replicas of one job, as every backend
runs them): real probes in the ranks' interpreter, real gloo all-reduces, real ports."""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import pytest

from tests.conftest import pids_alive, processes_with_env, wait_until
from tests.process.test_ddp_agent import REPO, Node, _no_leftovers, check_training  # noqa: F401
from trainlaunch import settings
from trainlaunch.agent.workers import reserve_port

pytestmark = pytest.mark.slow  # each starts torch in 2-4 processes, twice when it passes
HOST = socket.gethostname()


@pytest.fixture
def fake_torch(tmp_path: Path) -> Path:
    """A directory whose `torch` package claims another version (what a stale PYTHONPATH does)."""
    old = tmp_path / "old"
    (old / "torch").mkdir(parents=True)
    (old / "torch" / "__init__.py").write_text('__version__ = "2.12.0"\n')
    return old


def two_nodes(
    tmp: Path, *argv: str, envs: tuple[dict[str, str], ...] = ({}, {}), port: int = 0
) -> list[Node]:
    """Node 0 and node 1 of one 2-node job, each with its own extra environment."""
    port = port or reserve_port()
    nodes = []
    for i, extra in enumerate(envs):
        (tmp / str(i)).mkdir()
        env = {
            settings.REPLICA_ID: str(i),
            settings.RANK0_HOST: "localhost",
            settings.RDZV_PORT: str(port),
            "OUT_DIR": str(tmp),
            **extra,
        }
        nodes.append(
            Node(
                tmp / str(i),
                "--preflight",
                "--preflight-timeout",
                "60",
                "--nnodes",
                "2",
                *argv,
                env=env,
            )
        )
    return nodes


def no_rank_started(node: Node) -> bool:
    record = node.record()
    return record["workers"] == [] and not list(Path(record["run_dir"]).glob("attempt_*"))


def test_a_clean_preflight_passes_then_the_job_runs(tmp_path: Path) -> None:
    nodes = two_nodes(tmp_path, "--nproc-per-node", "2", "train_ddp.py", "--steps", "50")
    for node in nodes:
        rc, _, err = node.wait()
        assert rc == 0, err
        assert "[trainlaunch] preflight passed: 2 nodes in" in err
        assert (
            "all-reduce (gloo, 4 ranks)" in err
            and f"per node (16 MiB, its 2 ranks): node 0 ({HOST})" in err
        )
    check_training(tmp_path, 4)  # the real ranks ran after it, on the same store
    verdict = nodes[0].record()["preflight"]
    assert verdict["ok"] and verdict["stage"] == "all-reduce" and verdict["nodes"] == 2
    assert set(verdict["bandwidth"]["per_node"]) == {"0", "1"}
    assert verdict["fingerprint"]["torch"] == nodes[1].record()["preflight"]["fingerprint"]["torch"]


def test_a_node_whose_pythonpath_shadows_torch_is_refused_with_the_table(
    tmp_path: Path, fake_torch: Path
) -> None:
    shadowed = {"PYTHONPATH": f"{fake_torch}{os.pathsep}{REPO}"}
    nodes = two_nodes(tmp_path, "train_ddp.py", envs=({}, shadowed))
    for node in nodes:
        rc, _, err = node.wait()
        assert rc == settings.PREFLIGHT_EXIT_CODE, err
        lines = [ln.removeprefix("[trainlaunch] ") for ln in err.splitlines()]
        assert any(ln.startswith("preflight FAILED: 2 nodes, 1 problem") for ln in lines), err
        row = next(ln.split() for ln in lines if "torch  2.12.0 (" in ln)
        assert row[:5] == ["node", "1", f"({HOST})", "torch", "2.12.0"], err
        assert (
            f"  node 1 ({HOST}): torch 2.12.0 where node 0 ({HOST}) has " in err
            and f"(PYTHONPATH={fake_torch})" in err
        )
        assert no_rank_started(node)
        reply = json.loads(node.error_file.read_text())  # the backend's reply file: status shows it
        assert reply["exit_code"] == settings.PREFLIGHT_EXIT_CODE
        assert "torch 2.12.0 where" in reply["message"]["extraInfo"]["py_callstack"]
        assert node.record()["state"] == "FAILED"
    assert not list(tmp_path.glob("rank*.json"))


def test_a_variable_the_nodes_must_share(tmp_path: Path) -> None:
    nodes = two_nodes(tmp_path, "train_ddp.py", envs=({}, {"NCCL_ALGO": "Ring"}))
    for node in nodes:
        rc, _, err = node.wait()
        assert rc == settings.PREFLIGHT_EXIT_CODE, err
        assert f"node 1 ({HOST}): NCCL_ALGO=Ring where node 0 ({HOST}) has NCCL_ALGO unset" in err


def test_a_port_held_by_another_process_names_the_node(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        port = holder.getsockname()[1]
        nodes = two_nodes(tmp_path, "train_ddp.py", port=port)
        (rc0, _, err0), (rc1, _, err1) = (n.wait() for n in nodes)
    assert rc0 == rc1 == settings.PREFLIGHT_EXIT_CODE, (err0, err1)
    assert f"node 0 ({HOST}) cannot listen on port {port}" in err0
    assert f"held by pid {os.getpid()}" in err0  # who holds it, read from /proc
    assert f"node 1 ({HOST}) cannot reach the store at localhost:{port}" in err1
    assert all(no_rank_started(n) for n in nodes)


def test_sigterm_during_the_preflight_ends_it_and_its_probes(tmp_path: Path) -> None:
    (tmp_path / "0").mkdir()
    env = {
        settings.REPLICA_ID: "0",
        settings.RANK0_HOST: "localhost",
        settings.RDZV_PORT: str(reserve_port()),
    }
    # node 1 never comes: node 0 waits for its fingerprint, probes started
    node = Node(
        tmp_path / "0",
        "--preflight",
        "--nnodes",
        "2",
        "--nproc-per-node",
        "2",
        "train_ddp.py",
        env=env,
    )
    probes = wait_until(
        lambda: [
            p
            for p in processes_with_env(settings.REPLICA_LOG_DIR, str(node.dir))
            if p != node.proc.pid
        ],
        what="the probes",
    )
    wait_until(lambda: node.record()["state"] == "PREFLIGHT", what="the preflight")
    node.proc.send_signal(signal.SIGTERM)
    rc, _, err = node.wait(timeout=60)
    assert rc == 128 + signal.SIGTERM, err
    assert node.record()["state"] == "CANCELLED"
    wait_until(lambda: not pids_alive(probes), what="the probes to be gone")
