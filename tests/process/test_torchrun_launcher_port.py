"""PyTorch's own launcher tests (test/distributed/launcher/run_test.py), ported.

Each case runs the same torchrun flags three ways: real ``torchrun``, ``trainlaunch run --wait
dist.ddp`` and ``trainlaunch torchrun``; all three must end the same way (success or failure)
and leave the same files (one per global rank). etcd is replaced by c10d (no etcd here).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import CLI

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ddp"
TOUCH = str(FIXTURES / "touch_rank.py")
TOUCH_SH = str(FIXTURES / "touch_rank.sh")
ALLREDUCE = str(FIXTURES / "allreduce.py")
LAUNCHERS = ("torchrun", "run", "trainlaunch-torchrun")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Outcome:
    """How one launcher ended: its exit code, the rank files left, its console."""

    code: int
    files: frozenset[str]
    out: str
    err: str


def launch(
    cli: CLI,
    launcher: str,
    argv: list[str],
    out_dir: Path,
    env: dict[str, str] | None = None,
    timeout: float = 240,
) -> Outcome:
    """Run torchrun's argv through one launcher; {out} in argv is out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    args = [a.replace("{out}", str(out_dir)) for a in argv]
    head = {
        "torchrun": [sys.executable, "-m", "torch.distributed.run"],
        "run": [sys.executable, "-m", "trainlaunch", "run", "--wait", "dist.ddp"],
        "trainlaunch-torchrun": [sys.executable, "-m", "trainlaunch", "torchrun"],
    }[launcher]
    proc = subprocess.run(
        [*head, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**cli.env, "TEST_SENTINEL_PARENT": "FOOBAR", **(env or {})},
        cwd=cli.cwd,
    )
    return Outcome(proc.returncode, frozenset(os.listdir(out_dir)), proc.stdout, proc.stderr)


def outcomes(
    cli: CLI, tmp_path: Path, argv: list[str], env: dict[str, str] | None = None
) -> dict[str, Outcome]:
    """The same command through every launcher, one after the other."""
    return {k: launch(cli, k, argv, tmp_path / k, env) for k in LAUNCHERS}


def ranks(n: int) -> frozenset[str]:
    return frozenset(str(i) for i in range(n))


def assert_all_succeed(got: dict[str, Outcome], world: int) -> None:
    for k, o in got.items():
        assert o.code == 0, f"{k} exited {o.code}\n{o.out}\n{o.err}"
        assert o.files == ranks(world), f"{k}: {sorted(o.files)}"


def assert_all_refuse(got: dict[str, Outcome]) -> None:
    """Nothing ran; the drop-in exits as torchrun, `run dist.ddp` with its usage error (2)."""
    for k, o in got.items():
        assert o.code != 0 and not o.files, f"{k} exited {o.code}: {o.err}"
    dropin = got["trainlaunch-torchrun"]
    assert dropin.code == got["torchrun"].code, dropin.err
    assert dropin.err.startswith("error: ") and "Traceback" not in dropin.err, dropin.err
    assert got["run"].code == 2, got["run"].err


pytestmark = pytest.mark.slow  # real torchrun imports torch per case: ~20 s each here

C10D = ["--rdzv_backend=c10d", "--rdzv_id=launch-test", "--monitor_interval=1"]


def test_user_script_python(cli: CLI, tmp_path: Path) -> None:
    argv = ["--nnodes=1", "--nproc_per_node=2", *C10D, f"--rdzv_endpoint=localhost:{free_port()}"]
    got = outcomes(cli, tmp_path, [*argv, "--start_method=spawn", TOUCH, "--touch_file_dir={out}"])
    assert_all_succeed(got, 2)


def test_user_script_caffe2_bc(cli: CLI, tmp_path: Path) -> None:
    argv = ["--nnodes=1", "--nproc_per_node=2", "--monitor_interval=1", "--start_method=spawn"]
    argv += ["--master_addr=localhost", f"--master_port={free_port()}", "--node_rank=0"]
    assert_all_succeed(outcomes(cli, tmp_path, [*argv, TOUCH, "--touch_file_dir={out}"]), 2)


def test_user_script_bash_and_no_python_with_module(cli: CLI, tmp_path: Path) -> None:
    argv = ["--nnodes=1", "--nproc_per_node=2", "--standalone", "--no_python"]
    assert_all_refuse(outcomes(cli, tmp_path / "bad", [*argv, "--module", TOUCH_SH, "{out}"]))
    assert_all_succeed(outcomes(cli, tmp_path, [*argv, TOUCH_SH, "{out}"]), 2)


def test_user_script_default_nproc(cli: CLI, tmp_path: Path) -> None:
    argv = ["--nnodes=1", "--standalone", "--no_python", TOUCH_SH, "{out}"]
    assert_all_succeed(outcomes(cli, tmp_path, argv), 1)


def test_launch_with_env_vars(cli: CLI, tmp_path: Path) -> None:
    env = {
        "PET_NNODES": "1",
        "PET_NPROC_PER_NODE": "2",
        "PET_STANDALONE": "1",
        "PET_MONITOR_INTERVAL": "1",
        "PET_START_METHOD": "spawn",
        "PET_NO_PYTHON": "1",
    }
    bad = outcomes(cli, tmp_path / "bad", [TOUCH_SH, "{out}"], {**env, "PET_MODULE": "1"})
    assert_all_refuse(bad)
    got = outcomes(cli, tmp_path, [TOUCH_SH, "{out}"], {**env, "PET_MODULE": "0"})
    assert_all_succeed(got, 2)


def test_nproc_unknown_value_is_refused(cli: CLI, tmp_path: Path) -> None:
    argv = ["--nnodes=1", "--nproc_per_node=unknown", "--standalone", "--no_python"]
    assert_all_refuse(outcomes(cli, tmp_path, [*argv, TOUCH_SH, "{out}"]))


def test_nnodes_with_three_parts_is_refused(cli: CLI, tmp_path: Path) -> None:
    assert_all_refuse(outcomes(cli, tmp_path, ["--nnodes=2:20:30", TOUCH, "--touch-dir={out}"]))


def test_launch_standalone(cli: CLI, tmp_path: Path) -> None:
    argv = ["--nnodes=1", "--nproc_per_node=2", "--standalone", "--monitor_interval=1"]
    assert_all_succeed(outcomes(cli, tmp_path, [*argv, TOUCH, "--touch_file_dir={out}"]), 2)


def test_worker_raises_every_launcher_fails(cli: CLI, tmp_path: Path) -> None:
    argv = ["--nnodes=1", "--nproc_per_node=2", "--standalone", "--max_restarts=0"]
    got = outcomes(cli, tmp_path, [*argv, TOUCH, "--fail"])
    for k, o in got.items():
        assert o.code == 1, f"{k} exited {o.code}\n{o.err}"  # RuntimeError -> 1 everywhere
    assert "RuntimeError: failing on purpose" in got["trainlaunch-torchrun"].err


@pytest.mark.slow
def test_launch_run_path(cli: CLI, tmp_path: Path) -> None:
    argv = ["--run_path", "--nnodes=1", "--nproc_per_node=2", "--monitor_interval=1"]
    assert_all_succeed(outcomes(cli, tmp_path, [*argv, TOUCH, "--touch_file_dir={out}"]), 2)


@pytest.mark.slow
def test_is_torchelastic_launched_and_init_method_env(cli: CLI, tmp_path: Path) -> None:
    argv = ["--nnodes=1", "--nproc_per_node=2", "--master_addr=localhost"]
    argv += [f"--master_port={free_port()}", "--monitor_interval=1", ALLREDUCE, "{out}"]
    got = outcomes(cli, tmp_path, [*argv, "--init-method=env://"])
    assert_all_succeed(got, 2)
    for k in LAUNCHERS:
        assert '"launched": true' in (tmp_path / k / "0").read_text(), k


@pytest.mark.slow
def test_launch_elastic_one_agent(cli: CLI, tmp_path: Path) -> None:
    # one agent of a 1:2 job: it waits last_call_timeout for a second node, then runs alone
    argv = ["--nnodes=1:2", "--nproc_per_node=2", *C10D, "--rdzv_conf=last_call_timeout=2"]
    argv += [f"--rdzv_endpoint=localhost:{free_port()}", TOUCH, "--touch_file_dir={out}"]
    assert_all_succeed(outcomes(cli, tmp_path, argv), 2)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_launch_elastic_multiple_agents(cli: CLI, tmp_path: Path, launcher: str) -> None:
    # two agents started together join one 1:2 job: 2 x 2 ranks, both exit 0
    argv = ["--nnodes=1:2", "--nproc_per_node=2", *C10D, "--rdzv_conf=last_call_timeout=5"]
    argv += [f"--rdzv_endpoint=localhost:{free_port()}", TOUCH, "--touch_file_dir={out}"]
    with ThreadPoolExecutor(2) as pool:
        futs = [pool.submit(launch, cli, launcher, argv, tmp_path / "out") for _ in range(2)]
        got = [f.result() for f in futs]
    assert [o.code for o in got] == [0, 0], [o.err for o in got]
    assert frozenset(os.listdir(tmp_path / "out")) == ranks(4)
    assert {(tmp_path / "out" / r).read_text() for r in ranks(4)} == {"4"}
