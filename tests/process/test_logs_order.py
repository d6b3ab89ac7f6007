"""`logs` shows a replica's stdout and stderr in the order they were written.

tests/fixtures/interleave.py alternates ``out i`` (stdout) and ``err i`` (stderr) lines and
waits for each line to be recorded before writing the next, so the order is well defined.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import CLI

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "interleave.py"


def alternating(pairs: int, who: str = "") -> list[str]:
    return [f"{who}{s} {i}" for i in range(pairs) for s in ("out", "err")]


def test_plain_replica_in_order_and_one_stream_on_request(cli: CLI) -> None:
    handle = cli("run", "--wait", "utils.python", str(SCRIPT), "4", check=True).stdout.strip()
    assert cli("logs", "--raw", handle, check=True).stdout.splitlines() == alternating(4)
    out = cli("logs", "--raw", "--stream", "stdout", handle, check=True).stdout
    assert out.splitlines() == [f"out {i}" for i in range(4)]
    err = cli("logs", "--raw", "--stream", "stderr", handle, check=True).stdout
    assert err.splitlines() == [f"err {i}" for i in range(4)]
    old = cli("logs", "--raw", "--streams", "stderr", handle, check=True).stdout  # old spelling
    assert old == err
    rows = [json.loads(x) for x in cli("logs", "--json", handle, check=True).stdout.splitlines()]
    assert [r["line"] for r in rows] == alternating(4)
    since = cli("logs", "--raw", "--since", "1h", handle, check=True).stdout  # timeline path
    assert since.splitlines() == alternating(4)


def test_follow_shows_them_in_order_while_the_app_runs(cli: CLI) -> None:
    handle = cli.run("utils.python", str(SCRIPT), "5")
    out = cli("logs", "-f", "--raw", handle, timeout=120, check=True).stdout
    assert out.splitlines() == alternating(5)


@pytest.mark.parametrize("flag", ["--wait", "--log"])
def test_ddp_rank_lines_in_order(cli: CLI, flag: str) -> None:
    pytest.importorskip("torch")  # not needed by the script; dist.ddp's tests assume it
    run = cli("run", flag, "dist.ddp", "--nproc", "2", str(SCRIPT), "3", timeout=180)
    assert run.returncode == 0, run.stderr
    if flag == "--log":  # run --log streams the same interleaved lines live, one prefix each
        shown = [re.match(r"\[interleave/0 rank (\d)\] (.*)", ln) for ln in run.stdout.splitlines()]
        for rank in (0, 1):
            mine = [m[2] for m in shown if m and m[1] == str(rank)]
            assert mine == alternating(3, f"rank {rank} ")
        return
    handle = run.stdout.strip()
    lines = cli("logs", "--raw", handle, check=True).stdout.splitlines()
    for rank in (0, 1):
        mine = [ln.split("]:", 1)[1] for ln in lines if ln.startswith(f"[default{rank}]:")]
        assert mine == alternating(3, f"rank {rank} ")
    err = cli("logs", "--raw", "--stream", "stderr", handle, check=True).stdout
    assert all(" err " in ln for ln in err.splitlines() if "]:" in ln)
    # the agent's per-rank files: both streams of the rank, in order, without prefix
    app_dir = cli.home / "apps" / handle.rsplit("/", 1)[1]
    [rank1] = app_dir.glob("logs/*/0/*/attempt_0/1/combined.log")
    assert rank1.read_text().splitlines() == alternating(3, "rank 1 ")
