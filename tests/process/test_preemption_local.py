"""Preemption on the local backend: `stop --requeue` of a checkpointing 2-rank dist.ddp run.

The requeued run resumes from its checkpoint (restart count 1) and ends with exactly the
parameters of an uninterrupted run with the same seed; status shows the history.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import CLI, wait_until

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "preempt" / "ckpt_train.py"


def _start(cli: CLI, base: Path, *extra: str) -> str:
    (base / "ckpt").mkdir(parents=True)
    (base / "out").mkdir()
    return cli.run(
        "--seed",
        "7",
        "dist.ddp",
        "-j",
        "2",
        str(SCRIPT),
        "--ckpt",
        str(base / "ckpt"),
        "--out",
        str(base / "out"),
        *extra,
    )


def _finals(base: Path) -> list[dict[str, object]]:
    return [json.loads((base / "out" / f"final-rank{r}.json").read_text()) for r in (0, 1)]


@pytest.mark.slow  # three torch runs of 2 ranks: 20-90 s on a busy 2-core machine
def test_stop_requeue_resumes_and_matches_an_uninterrupted_run(cli: CLI, tmp_path: Path) -> None:
    plain = _start(cli, tmp_path / "plain")
    preempted = _start(cli, tmp_path / "preempted", "--hold-at", "10")
    try:
        wait_until(
            lambda: (tmp_path / "preempted" / "ckpt" / "ready").exists(),
            timeout=120,
            what="the run to reach step 10",
        )
        stopped = cli("stop", "--requeue", "--json", preempted, check=True)
        assert json.loads(stopped.stdout)["state"] in ("RUNNING", "PENDING")
        status = cli.wait(preempted, timeout=120)
        assert status["state"] == "SUCCEEDED", status
        assert cli.wait(plain, timeout=120)["state"] == "SUCCEEDED"
    finally:
        cli("stop", preempted)
        cli("stop", plain)
    assert status["num_requeues"] == 1 and status["num_restarts"] == 0
    reasons = [a["reason"] for a in status["attempts"]]
    assert reasons == ["preempted (stop --requeue)", "succeeded"], status["attempts"]
    assert all(a["start"] and a["end"] for a in status["attempts"])
    assert (tmp_path / "preempted" / "ckpt" / "ckpt.pt").exists()
    logs = cli("logs", preempted, check=True).stdout
    assert "saved at step 11" in logs and "resumed at step 11 (restart 1)" in logs
    got, want = _finals(tmp_path / "preempted"), _finals(tmp_path / "plain")
    assert [g["restart"] for g in got] == [1, 1] and [w["restart"] for w in want] == [0, 0]
    assert [g["params"] for g in got] == [w["params"] for w in want]  # bit for bit
    assert [g["loss"] for g in got] == [w["loss"] for w in want]
    text = cli("status", preempted, check=True).stdout
    assert "requeues: 1" in text and "history:" in text and "preempted (stop --requeue)" in text


def test_a_rank_that_exits_75_is_requeued_until_max_requeues(cli: CLI, tmp_path: Path) -> None:
    marker = tmp_path / "runs"
    handle = cli.run(
        "--cfg",
        "max_requeues=2",
        "utils.sh",
        f"echo run >> {marker}; exit 75",
    )
    status = cli.wait(handle)
    assert status["state"] == "FAILED" and status["exit_code"] == 75
    assert status["num_requeues"] == 2 and status["num_restarts"] == 0
    assert len(marker.read_text().splitlines()) == 3
    assert [a["attempt"] for a in status["attempts"]] == [0, 1, 2]


def test_stop_requeue_of_a_finished_app_is_a_usage_error(cli: CLI) -> None:
    handle = cli.run("utils.echo", "--msg", "hi")
    cli.wait(handle)
    proc = cli("stop", "--requeue", handle)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ")
    assert "nothing to requeue" in proc.stderr
