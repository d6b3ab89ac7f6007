"""The node agent driven directly (``python -m trainlaunch.agent``), as every backend runs it.

Real processes only: a real DDP run over gloo, failures with and without ``@record``,
signals, restarts, SIGTERM/SIGKILL to the agent, concurrent jobs, console modes, latency.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import pids_alive, wait_until
from trainlaunch import settings
from trainlaunch.agent.workers import reserve_port

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ddp"
REPO = FIXTURES.parents[2]
_started: list[Node] = []


@pytest.fixture(autouse=True)
def _no_leftovers() -> Iterator[None]:
    """A failing test must not leave an agent (and so its ranks) running."""
    yield
    while _started:
        node = _started.pop()
        if node.proc.poll() is None:
            node.proc.kill()  # PR_SET_PDEATHSIG takes the ranks with it
            node.proc.communicate()


class Node:
    """One agent process with the replica environment a backend gives it."""

    def __init__(self, tmp: Path, *argv: str, env: dict[str, str] | None = None) -> None:
        self.dir = tmp / "replica"
        self.error_file = self.dir / "error.json"
        full = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            settings.REPLICA_LOG_DIR: str(self.dir),
            "TORCHELASTIC_ERROR_FILE": str(self.error_file),
            **(env or {}),
        }
        for k in [k for k in full if k.startswith("PET_")]:
            del full[k]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trainlaunch.agent", *argv],
            env=full,
            cwd=FIXTURES,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _started.append(self)

    def wait(self, timeout: float = 120) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def record(self) -> dict[str, Any]:
        return json.loads((self.dir / "agent.json").read_text())

    def rank_file(self, local_rank: int, name: str, attempt: int = 0) -> Path:
        run_dir = Path(self.record()["run_dir"])
        return run_dir / f"attempt_{attempt}" / str(local_rank) / name

    def pids(self, pid_dir: Path, n: int) -> list[int]:
        files = wait_until(
            lambda: len(list(pid_dir.glob("*.pid"))) == n and list(pid_dir.glob("*.pid")),
            what=f"{n} pid files",
        )
        return [int(f.read_text()) for f in files]


def check_training(out_dir: Path, world: int) -> None:
    results = [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(world)]
    assert all(r["world"] == world for r in results)
    assert all(r["last"] < 0.5 * r["first"] for r in results), results  # it learns
    assert all(r["params"] == results[0]["params"] for r in results)  # DDP kept them in sync


@pytest.mark.slow  # 15 s serially on a busy 2-core machine (--durations)
def test_real_ddp_training_on_4_ranks(tmp_path: Path) -> None:
    node = Node(
        tmp_path,
        "--nproc-per-node",
        "4",
        "train_ddp.py",
        "--steps",
        "200",
        env={"OUT_DIR": str(tmp_path)},
    )
    rc, out, err = node.wait()
    assert rc == 0, err
    check_training(tmp_path, 4)
    assert "rank 3 step 0 loss" in out and "[default3]:" not in out  # --tee 0, as torchrun's
    assert "rank 3 step 0 loss" in node.rank_file(3, "stdout.log").read_text()
    assert node.record()["state"] == "SUCCEEDED"


@pytest.mark.slow  # 14 s serially on a busy 2-core machine (--durations)
def test_real_ddp_training_on_2_nodes_x_2(tmp_path: Path) -> None:
    # two agents as two replicas: node 0's agent hosts the store at the backend's port
    port = str(reserve_port())
    nodes = []
    for i in (0, 1):
        (tmp_path / str(i)).mkdir()
        nodes.append(
            Node(
                tmp_path / str(i),
                "--nnodes",
                "2",
                "--nproc-per-node",
                "2",
                "train_ddp.py",
                "--steps",
                "100",
                env={
                    "OUT_DIR": str(tmp_path),
                    settings.REPLICA_ID: str(i),
                    settings.RANK0_HOST: "localhost",
                    settings.RDZV_PORT: port,
                },
            )
        )
    for node in nodes:
        rc, _, err = node.wait()
        assert rc == 0, err
    check_training(tmp_path, 4)
    assert [w["rank"] for w in nodes[1].record()["workers"]] == [2, 3]


@pytest.mark.parametrize("record", [False, True])
def test_a_raising_rank_is_the_root_cause(tmp_path: Path, record: bool) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    node = Node(
        tmp_path,
        "--nproc-per-node",
        "3",
        "fail.py",
        "1",
        "raise",
        *(["--record"] if record else []),
        env={"PID_DIR": str(pid_dir)},
    )
    rc, _, err = node.wait()
    assert rc == 1
    assert "rank 1 (local_rank 1, node 0" in err and "exited with code 1" in err
    assert "ValueError: boom from rank 1" in err and 'fail.py", line' in err
    assert "<N/A>" not in err
    reply = json.loads(node.error_file.read_text())
    assert (reply["rank"], reply["local_rank"], reply["exit_code"]) == (1, 1, 1)
    assert reply["message"]["message"] == "ValueError: boom from rank 1"
    assert "Traceback (most recent call last)" in reply["message"]["extraInfo"]["py_callstack"]
    assert (reply["error_file"] is not None) == record  # @record's own reply file, if written
    # the waiting ranks were stopped (a rank stopped before it wrote its pid file has no
    # file to check; the agent has exited, so no more files can appear)
    started = [int(f.read_text()) for f in pid_dir.glob("*.pid") if f.read_text().strip()]
    assert started and not pids_alive(started)
    assert node.record()["root_cause"]["rank"] == 1


@pytest.mark.parametrize(
    "mode, code, how",
    [("signal:SIGKILL", 137, "killed by SIGKILL"), ("exit:7", 7, "exited with code 7")],
)
def test_signal_or_exit_code_of_the_failing_rank(
    tmp_path: Path, mode: str, code: int, how: str
) -> None:
    node = Node(tmp_path, "--nproc-per-node", "2", "fail.py", "0", mode)
    rc, _, err = node.wait()
    assert rc == code and "rank 0 (local_rank 0, node 0" in err and how in err
    reply = json.loads(node.error_file.read_text())
    assert reply["exit_code"] == code
    assert reply["signal"] == ("SIGKILL" if "signal" in mode else None)
    if "exit" in mode:  # no traceback: the stderr tail is shown instead
        assert "exiting on purpose" in reply["message"]["extraInfo"]["py_callstack"]


def test_restart_runs_a_fresh_attempt_and_succeeds(tmp_path: Path) -> None:
    node = Node(
        tmp_path,
        "--nproc-per-node",
        "2",
        "--max-restarts",
        "2",
        "dump_env.py",
        "--fail-rank",
        "1",
        env={"DUMP_DIR": str(tmp_path)},
    )
    rc, _, err = node.wait()
    assert rc == 0, err
    assert "rank 1 exited with code 3; restarting all 2 workers (restart 1 of 2)" in err
    rec = node.record()
    assert rec["restarts"] == 1 and [a["result"] for a in rec["attempts"]] == [
        "FAILED",
        "SUCCEEDED",
    ]
    assert rec["attempts"][0]["root_cause"]["rank"] == 1
    for attempt in (0, 1):  # each attempt's logs kept apart
        assert node.rank_file(1, "stderr.log", attempt).exists()
    env = json.loads((tmp_path / "rank1_a1.json").read_text())["env"]
    assert (
        env["TORCHELASTIC_RESTART_COUNT"] == "1"
        and "attempt_1/1/error.json" in env["TORCHELASTIC_ERROR_FILE"]
    )


def test_restarts_exhausted(tmp_path: Path) -> None:
    node = Node(tmp_path, "--nproc-per-node", "2", "--max-restarts", "1", "fail.py", "1", "exit:5")
    rc, _, err = node.wait()
    assert rc == 5 and "FAILED (restarts: 1/1)" in err
    assert [a["attempt"] for a in node.record()["attempts"]] == [0, 1]


@pytest.mark.slow  # 6 s serially on a busy 2-core machine (--durations)
def test_sigterm_mid_training_stops_every_rank(tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    node = Node(
        tmp_path,
        "--nproc-per-node",
        "2",
        "train_ddp.py",
        "--steps",
        "1000000",
        "--pid-dir",
        str(pid_dir),
        env={"OUT_DIR": str(tmp_path)},
    )
    pids = node.pids(pid_dir, 2)
    wait_until(
        lambda: (
            (node.dir / "agent.json").exists()
            and "step 0" in node.rank_file(1, "stdout.log").read_text()
        ),
        timeout=60,
        what="training",
    )
    node.proc.send_signal(signal.SIGTERM)
    rc, _, err = node.wait(timeout=60)
    assert rc == 128 + signal.SIGTERM
    assert "got SIGTERM" in err
    assert not pids_alive(pids)
    rec = node.record()
    assert rec["state"] == "CANCELLED"
    assert {w["signal"] for w in rec["workers"]} == {"SIGTERM"}  # forwarded, not SIGKILLed


def test_grace_period_then_sigkill(tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    node = Node(
        tmp_path,
        "--nproc-per-node",
        "2",
        "--shutdown-timeout",
        "1",
        "stubborn.py",
        env={"PID_DIR": str(pid_dir)},
    )
    pids = node.pids(pid_dir, 2)
    start = time.monotonic()
    node.proc.send_signal(signal.SIGTERM)  # forwarded, and ignored by the ranks
    rc, _, _ = node.wait(timeout=30)
    assert rc == 128 + signal.SIGTERM
    assert 1.0 <= time.monotonic() - start < 10
    assert not pids_alive(pids)
    assert {w["signal"] for w in node.record()["workers"]} == {"SIGKILL"}


def test_no_rank_outlives_a_sigkilled_agent(tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    node = Node(
        tmp_path, "--nproc-per-node", "3", "fail.py", "99", "raise", env={"PID_DIR": str(pid_dir)}
    )
    pids = node.pids(pid_dir, 3)
    wait_until(lambda: (node.dir / "agent.json").exists(), what="agent.json")
    assert {w["pid"] for w in node.record()["workers"]} == set(pids)  # for the backend's stop
    node.proc.kill()
    node.wait()
    wait_until(lambda: not pids_alive(pids), timeout=10, what="ranks to die with the agent")


@pytest.mark.slow  # 6 s serially on a busy 2-core machine (--durations)
def test_two_jobs_started_at_the_same_moment(tmp_path: Path) -> None:
    # one rank each is enough: each job's agent hosts its store on its own free port
    nodes = []
    for i in (0, 1):
        (tmp_path / str(i)).mkdir()
        nodes.append(
            Node(
                tmp_path / str(i),
                "--nproc-per-node",
                "1",
                "train_ddp.py",
                "--steps",
                "5",
                env={"OUT_DIR": str(tmp_path / str(i))},
            )
        )
    for node in nodes:
        rc, _, err = node.wait()
        assert rc == 0, err
    ports = {n.record()["master_port"] for n in nodes}
    assert len(ports) == 2  # each job's store got its own free port


@pytest.mark.parametrize(
    "argv, out_has, out_lacks, err_has",
    [
        ([], ["out 0 a\n", "out 1 b\n"], ["[default"], ["err 1\n"]),
        (
            ["--tee", "3"],
            ["[default0]:out 0 a\n", "[default1]:out 1 b\n"],
            [],
            ["[default1]:err 1"],
        ),
        (["--tee", "3", "--local-ranks-filter", "1"], ["[default1]:out 1 a"], ["out 0"], []),
        (["--redirects", "3"], [], ["out"], []),
        (["--redirects", "1", "--role", "w"], [], ["out"], ["err 0"]),
    ],
)
def test_console_follows_tee_redirects_and_filter(
    tmp_path: Path, argv: list[str], out_has: list[str], out_lacks: list[str], err_has: list[str]
) -> None:
    node = Node(tmp_path, "--nproc-per-node", "2", *argv, "chatter.py")
    rc, out, err = node.wait()
    assert rc == 0
    assert all(s in out for s in out_has) and not any(s in out for s in out_lacks), out
    assert all(s in err for s in err_has), err
    for lr in (0, 1):  # the files always have everything, unprefixed
        assert node.rank_file(lr, "stdout.log").read_text() == f"out {lr} a\nout {lr} b\n"
        assert node.rank_file(lr, "stderr.log").read_text() == f"err {lr}\n"


def test_log_lines_reach_the_console_promptly(tmp_path: Path) -> None:
    node = Node(tmp_path, "--nproc-per-node", "1", "--tee", "3", "ticker.py")
    assert node.proc.stdout is not None
    delays = []
    for _ in range(5):
        line = node.proc.stdout.readline()
        delays.append(time.time() - float(line.split()[-1]))
    node.proc.terminate()
    node.wait()
    assert sorted(delays)[2] < 0.2, delays  # median: the agent does not poll


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_agent_idles_while_ranks_run_after_one_exited(tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    go = tmp_path / "go"
    node = Node(
        tmp_path,
        "--nproc-per-node",
        "2",
        "staggered.py",
        env={"PID_DIR": str(pid_dir), "GO_FILE": str(go)},
    )
    node.pids(pid_dir, 1)
    wait_until(lambda: (node.dir / "agent.json").exists(), what="agent.json")
    rank0 = node.record()["workers"][0]["pid"]
    wait_until(lambda: not pids_alive([rank0]), what="rank 0 to exit")
    before = cpu_seconds(node.proc.pid)
    time.sleep(1.0)  # measuring, not synchronising: an event-driven agent uses no CPU here
    used = cpu_seconds(node.proc.pid) - before
    go.touch()
    rc, _, err = node.wait()
    assert rc == 0, err
    assert used < 0.05, f"the agent used {used:.2f} s of CPU in 1 s of waiting"


def test_log_dir_dev_null_keeps_no_files_but_still_explains(tmp_path: Path) -> None:
    node = Node(
        tmp_path, "--log-dir", os.devnull, "--nproc-per-node", "2", "fail.py", "0", "exit:3"
    )
    rc, _, err = node.wait()
    assert rc == 3 and "exiting on purpose" in err  # the stderr tail is kept in memory
    assert node.record()["run_dir"] == os.devnull


def test_missing_executable(tmp_path: Path) -> None:
    node = Node(tmp_path, "--no-python", "./no-such-program")
    rc, _, err = node.wait()
    assert rc == 127 and "cannot start './no-such-program'" in err


def test_usage_error_is_one_line_and_exit_2(tmp_path: Path) -> None:
    node = Node(tmp_path, "--nnodes", "0", "t.py")
    rc, _, err = node.wait()
    assert rc == 2 and err.startswith("trainlaunch.agent: error: --nnodes")


def test_torchrun_engine_execs_real_torchrun(tmp_path: Path) -> None:
    node = Node(
        tmp_path,
        "--engine",
        "torchrun",
        "--nproc-per-node",
        "2",
        "dump_env.py",
        env={"DUMP_DIR": str(tmp_path)},
    )
    agent_pid = node.proc.pid
    rc, _, err = node.wait()
    assert rc == 0, err
    assert "using torchrun: --engine torchrun" in err
    env = json.loads((tmp_path / "rank1_a0.json").read_text())["env"]
    assert env["TORCHELASTIC_USE_AGENT_STORE"] == "True"  # torchrun's own store
    assert str(node.dir) in env["TORCHELASTIC_ERROR_FILE"]  # logs in the replica's dir
    assert node.record()["engine"] == "torchrun" and node.record()["pid"] == agent_pid


@pytest.mark.parametrize("ignore", ["", "IGNORE_INT", "IGNORE_INT,IGNORE_TERM"])
def test_an_interrupt_goes_to_the_ranks_as_sigint_then_sigterm_then_sigkill(
    tmp_path: Path, ignore: str
) -> None:
    # issue 22 #23: Ctrl-C reached the ranks as SIGTERM, so `except KeyboardInterrupt` never
    # ran; torchrun forwards SIGINT. Then, after the grace period, SIGTERM; then SIGKILL.
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    env = {"PID_DIR": str(pid_dir), **{k: "1" for k in ignore.split(",") if k}}
    node = Node(
        tmp_path, "--nproc-per-node", "2", "--shutdown-timeout", "1", "interrupted.py", env=env
    )
    pids = node.pids(pid_dir, 2)
    node.proc.send_signal(signal.SIGINT)
    node.proc.send_signal(signal.SIGTERM)  # the launcher's stop, right after: no shortcut
    rc, out, err = node.wait(timeout=60)
    assert rc == 128 + signal.SIGINT, err
    assert "got SIGINT: forwarding it to all 2 workers" in err
    assert not pids_alive(pids)
    outs = [node.rank_file(lr, "stdout.log").read_text() for lr in (0, 1)]
    assert all(f"rank {r} KeyboardInterrupt handled" in o for r, o in enumerate(outs)), outs
    signals = {w["signal"] for w in node.record()["workers"]}
    if not ignore:
        assert signals == {None} and not any("SIGTERM" in o for o in outs)
    elif ignore == "IGNORE_INT":  # SIGTERM after the grace period
        assert all(f"rank {r} got SIGTERM" in o for r, o in enumerate(outs)), outs
    else:
        assert signals == {"SIGKILL"}
        assert "SIGKILL" in err
