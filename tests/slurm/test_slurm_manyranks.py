"""Many ranks, one story on the real Slurm cluster (2 nodes): merged logs, the collective a hung
job waits in (torch's Flight Recorder, gloo), failures explained across nodes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import CLI
from tests.slurm.conftest import run_cli, wait_cli

pytestmark = [pytest.mark.slurm]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ddp"
TIMEOUT_S = 240.0


def _run(cli: CLI, *args: str) -> str:
    return run_cli(cli, *args)


def _wait(cli: CLI, handle: str) -> dict:
    return wait_cli(cli, handle, TIMEOUT_S)


@pytest.fixture
def cli(two_nodes: None, tmp_path: Path) -> CLI:
    work = tmp_path / "work"
    work.mkdir()
    return CLI(tmp_path / "home", work)


def test_two_nodes_of_four_ranks_one_warning_and_eight_losses(cli: CLI) -> None:
    handle = _run(
        cli, "dist.ddp", "--nnodes", "2", "--nproc", "4", str(FIXTURES / "many.py"), "warn", "2"
    )
    try:
        assert _wait(cli, handle)["state"] == "SUCCEEDED"
        lines = cli("logs", "--merge", handle, check=True).stdout.splitlines()
    finally:
        cli("stop", handle)
    assert [ln for ln in lines if "UserWarning" in ln] == [
        f"[many ranks 0-7] {FIXTURES / 'many.py'}:15: UserWarning: the same warning from every rank"
    ]
    for epoch in (0, 1):
        assert lines.count(f"[many ranks 0-7] Epoch {epoch}: starting") == 1
        losses = [
            ln for ln in lines if re.fullmatch(rf"\[many/[01] rank \d\] loss {epoch}\.\d+", ln)
        ]
        assert sorted(ln.split("]")[0] for ln in losses) == [
            f"[many/{r // 4} rank {r}" for r in range(8)
        ]


@pytest.mark.slow
def test_a_hung_job_names_the_collective_and_the_rank_that_never_entered_it(cli: CLI) -> None:
    pytest.importorskip("torch")
    hang = FIXTURES / "hang.py"
    sleep_line = next(
        i for i, ln in enumerate(hang.read_text().splitlines(), 1) if "the odd rank" in ln
    )
    handle = _run(
        cli,
        "--hang-timeout",
        "8",
        "--on-hang",
        "stop",
        "dist.ddp",
        "--nnodes",
        "2",
        "--nproc",
        "2",
        str(hang),
    )
    try:
        st = _wait(cli, handle)
    finally:
        cli("stop", handle)
    story = f"ranks 0,2-3 wait in all_reduce #4 (pg 0, 4 B); rank 1 last completed #3 and is at hang.py:{sleep_line}"
    assert st["hang"]["collectives"]["lines"] == [story], st["hang"]
    assert st["failure"]["kind"] == "stopped"
    assert st["failure"]["line"].startswith(
        "stopped by the hang watchdog: no progress from any rank for "
    )
    assert st["failure"]["line"].endswith(story)
    assert story in cli("status", handle, check=True).stdout


def test_a_module_missing_on_the_second_node_only(cli: CLI) -> None:
    handle = _run(
        cli, "dist.ddp", "--nnodes", "2", "--nproc", "2", "--env", "CRASH_NODE=1",
        str(FIXTURES / "crash.py"), "module",
    )  # fmt: skip
    try:
        st = _wait(cli, handle)
    finally:
        cli("stop", handle)
    f = st["failure"]
    assert st["state"] == "FAILED" and f["kind"] == "module_missing", st
    assert (
        "ModuleNotFoundError: No module named 'trainlaunch_test_module_that_is_not_installed'"
        in f["line"]
    )
    assert f["line"].endswith("on crash/1 (n2) only: the nodes' environments differ"), f
