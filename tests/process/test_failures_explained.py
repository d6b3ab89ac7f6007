"""Failures explained: each kind provoked for real on the local backend, explained in one line
in `status`, `wait`, `run --wait` and `status --json`'s failure object (docs/failures.md).

Torch-free ranks (tests/fixtures/ddp/crash.py) unless the failure is torch's own; the OOM kill
runs the whole app in a memory-limited cgroup of its own where this machine lets a test make
one (root, cgroup v1 memory or v2), else under an address-space limit (RLIMIT_AS): the test
says which ran.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI, wait_until
from trainlaunch.node import evidence

CRASH = Path(__file__).resolve().parents[1] / "fixtures" / "ddp" / "crash.py"


def failed(cli: CLI, *args: str, timeout: float = 180) -> tuple[dict[str, Any], str]:
    """`run --wait` an app that fails: (status --json, what run --wait printed on stderr)."""
    run = cli("run", "--wait", *args, timeout=timeout)
    assert run.returncode != 0, run.stderr
    handle = run.stdout.strip()
    return cli.status(handle), run.stderr


@contextlib.contextmanager
def memory_cgroup(limit: int) -> Iterator[Path | None]:
    """A child of this process's memory cgroup limited to limit bytes (None: cannot make one)."""
    mine = evidence.memory_cgroup()
    if mine is None or os.geteuid() != 0:
        yield None
        return
    child = mine.dir / f"trainlaunch-test-{os.getpid()}"
    try:
        child.mkdir()
        name = "memory.max" if mine.v2 else "memory.limit_in_bytes"
        (child / name).write_text(str(limit))
    except OSError:
        with contextlib.suppress(OSError):
            child.rmdir()
        yield None
        return
    try:
        yield child
    finally:  # every process of the app has ended (run --wait returned): the group empties
        procs = child / "cgroup.procs"
        wait_until(lambda: not procs.read_text().strip(), timeout=30, what="the cgroup to empty")
        child.rmdir()


def test_the_oom_killer_names_the_rank_its_peak_and_the_limit(
    cli: CLI, record_property: Any
) -> None:
    with memory_cgroup(300 << 20) as group:
        if group is None:  # no cgroup of our own: an address-space limit refuses instead
            record_property("memory_limit", "RLIMIT_AS (no cgroup could be made)")
            status, _ = failed(cli, "dist.ddp", "--nproc", "2", str(CRASH), "rlimit", "1")
            assert status["failure"]["kind"] == "host_alloc"
            return
        record_property("memory_limit", f"cgroup {group}")
        # the CLI joins the group first: its supervisor, the agent and the ranks inherit it
        wrapper = f'echo $$ > "{group}/cgroup.procs" && exec "$@"'
        argv = ["sh", "-c", wrapper, "sh", sys.executable, "-m", "trainlaunch", "run", "--wait"]
        proc = subprocess.run(
            [*argv, "dist.ddp", "--nproc", "2", str(CRASH), "oom", "1"],
            capture_output=True, text=True, timeout=180, env=cli.env, cwd=cli.cwd,
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    status = cli.status(proc.stdout.strip())
    f = status["failure"]
    assert f["kind"] == "oom_killed" and f["rank"] == 1, f
    assert f["line"].startswith("rank 1 was killed by the OOM killer at ")
    assert f["line"].endswith("(cgroup limit 300 MiB)")
    assert any("oom_kill +1" in e for e in f["evidence"])
    assert any("Killed process" in e for e in f["evidence"])  # the kernel log (root reads it)
    assert "why:      rank 1 was killed by the OOM killer" in proc.stderr  # run --wait says so
    assert "killed by SIGKILL" in status["msg"]


def test_an_address_space_limit_refuses_the_allocation(cli: CLI) -> None:
    status, err = failed(cli, "dist.ddp", "--nproc", "2", str(CRASH), "rlimit", "1")
    f = status["failure"]
    assert f["kind"] == "host_alloc" and f["line"] == (
        "rank 1 could not allocate host memory (MemoryError)"
    )
    assert "why:" in err


@pytest.mark.parametrize(
    ("mode", "kind", "line"),
    [
        ("abort", "abort", "rank 0 aborted (SIGABRT)"),
        ("segv", "segfault", "rank 0 crashed: segmentation fault (SIGSEGV) in native code"),
        ("bus", "bus_error", "rank 0 was killed by SIGBUS (bus error): "),
    ],
)
def test_a_rank_killed_by_its_own_signal(cli: CLI, mode: str, kind: str, line: str) -> None:
    status, _ = failed(cli, "dist.ddp", "--nproc", "2", str(CRASH), mode)
    f = status["failure"]
    assert f["kind"] == kind and f["line"].startswith(line), f
    if kind == "bus_error":
        assert "/dev/shm has " in f["line"] and any(
            e.startswith("/dev/shm: ") for e in f["evidence"]
        )
    text = cli("status", status["handle"], check=True).stdout
    assert f"why:      {f['line']}" in text


def test_a_port_held_by_another_process(cli: CLI) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        status, err = failed(
            cli, "dist.ddp", "--nproc", "2", "--master-port", str(port), str(CRASH), "sleep"
        )
    f = status["failure"]
    assert f["kind"] == "port_in_use", f
    assert f["line"].startswith(
        f"node 0's agent could not host the c10d store: port {port} is already in use by pid "
        f"{os.getpid()} ("
    )
    assert f["line"] in err


def test_a_rank_killed_from_outside_is_not_taken_for_the_oom_killer(
    cli: CLI, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    handle = cli.run("dist.ddp", "--nproc", "2", "--env", f"PID_DIR={pids}", str(CRASH), "sleep")
    try:
        pid_file = wait_until(lambda: (p := pids / "rank1.pid").exists() and p, what="rank 1")
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        status = cli.wait(handle)
    finally:
        cli("stop", handle)
    f = status["failure"]
    assert (
        f["kind"] == "killed"
        and f["line"] == "rank 1 was killed by SIGKILL from outside trainlaunch"
    )
    if evidence.memory_cgroup() is not None:
        assert any(e.startswith("not the OOM killer: no oom_kill in ") for e in f["evidence"])


def test_stop_says_who_stopped_it(cli: CLI) -> None:
    handle = cli.run("dist.ddp", "--nproc", "2", str(CRASH), "sleep")
    try:
        wait_until(lambda: cli("logs", handle).stdout.count("started") == 2, what="both ranks")
        cli("stop", handle, check=True)
        status = cli.wait(handle)
    finally:
        cli("stop", handle)
    assert status["state"] == "CANCELLED"
    assert status["failure"]["kind"] == "stopped"
    assert status["failure"]["line"].startswith("stopped by `trainlaunch stop`")


def test_a_module_missing_on_one_node_only(cli: CLI) -> None:
    status, err = failed(
        cli,
        "dist.ddp",
        "--nnodes",
        "2",
        "--nproc",
        "2",
        "--env",
        "CRASH_NODE=1",
        str(CRASH),
        "module",
    )
    f = status["failure"]
    assert f["kind"] == "module_missing", f
    assert f["line"].startswith(
        "rank 2: ModuleNotFoundError: No module named 'trainlaunch_test_module_that_is_not_installed'"
    ) or f["line"].startswith("rank 3: ModuleNotFoundError")
    assert f["line"].endswith(
        f"on crash/1 ({socket.gethostname()}) only: the nodes' environments differ"
    )
    assert json.dumps(f) and "why:" in err


TORCH_FAIL = CRASH.parent / "torch_fail.py"
FALLOUT = CRASH.parent / "fallout.py"


@pytest.mark.slow
def test_cuda_out_of_memory_names_the_allocation(cli: CLI) -> None:
    pytest.importorskip("torch")
    status, _ = failed(cli, "dist.ddp", "--nproc", "2", str(TORCH_FAIL), "cuda_oom", timeout=300)
    f = status["failure"]
    assert f["kind"] == "cuda_oom" and f["line"] == (
        "rank 1 ran out of GPU memory on GPU 0: tried to allocate 2.00 GiB"
    )


@pytest.mark.slow
def test_a_node_that_never_starts_is_named_by_the_rendezvous(cli: CLI) -> None:
    pytest.importorskip("torch")
    with socket.socket() as s:  # a free port for node 0's store; node 1 is never started
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    status, err = failed(
        cli, "dist.ddp", "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1",
        "--master-port", str(port), "--nproc", "2", str(TORCH_FAIL), "rendezvous", timeout=300,
    )  # fmt: skip
    f = status["failure"]
    assert f["kind"] == "rendezvous_timeout", f
    assert (
        f["line"].startswith("rank ")
        and "to join: node 1 of 2 never arrived (after 10 s)" in f["line"]
    )


@pytest.mark.slow
def test_a_peer_that_dies_is_the_cause_and_the_others_its_fallout(cli: CLI) -> None:
    pytest.importorskip("torch")
    status, err = failed(
        cli, "dist.ddp", "--nnodes", "2", "--nproc", "2", str(FALLOUT), timeout=300
    )
    f = status["failure"]
    assert f["kind"] == "exception" and f["rank"] == 3, f
    assert f["line"].startswith(
        "rank 3 raised ValueError: rank 3 gives up at step 5 at fallout.py:"
    )
    assert f["line"].endswith("(fallout/1 on " + socket.gethostname() + ")")
    assert any(
        e.startswith("fallout on fallout/0: rank ") and "lost a peer in a collective (gloo: " in e
        for e in f["evidence"]
    ), f["evidence"]


def test_a_plain_replica_is_explained_by_the_supervisor(cli: CLI) -> None:
    (cli.cwd / "plain.py").write_text("import os\nos.abort()\n")
    status, err = failed(cli, "utils.python", "plain.py")
    f = status["failure"]
    assert (f["kind"], f["line"]) == ("abort", "rank 0 aborted (SIGABRT)"), f
    assert "why:      rank 0 aborted (SIGABRT)" in err
