"""dist.ddp end to end through the CLI on the local backend: status, logs, stop."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import CLI, pids_alive, wait_until

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ddp"


def test_failure_shows_rank_exit_code_and_traceback(cli: CLI) -> None:
    handle = cli.run("dist.ddp", "--nproc", "3", str(FIXTURES / "fail.py"), "1", "raise")
    status = cli.wait(handle)
    assert status["state"] == "FAILED" and status["exit_code"] == 1
    reply = json.loads(status["structured_error_msg"])
    assert (reply["rank"], reply["local_rank"], reply["exit_code"]) == (1, 1, 1)
    text = cli("status", handle).stdout
    assert "rank 1, local_rank 1" in text and "exited with code 1" in text
    assert "ValueError: boom from rank 1" in text and 'fail.py", line' in text
    assert cli("wait", handle).returncode == 1


def test_success_logs_are_prefixed_per_rank(cli: CLI) -> None:
    handle = cli.run("dist.ddp", "-j", "2", str(FIXTURES / "chatter.py"))
    assert cli.wait(handle)["state"] == "SUCCEEDED"
    logs = cli("logs", handle, check=True).stdout
    assert "[chatter/0 rank 0] out 0 a" in logs and "[chatter/0 rank 1] out 1 b" in logs
    assert "[default" not in logs  # one prefix per line: the agent's --tee prefix is read back
    raw = cli("logs", "--raw", handle, check=True).stdout  # as written
    assert "[default0]:out 0 a" in raw and "[default1]:err 1" in raw


def test_stop_mid_run_cancels_and_no_rank_survives(cli: CLI, tmp_path: Path) -> None:
    # torch-free ranks that run until stopped (test_ddp_agent stops a real training run)
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    handle = cli.run(
        "dist.ddp",
        "--nproc",
        "2",
        "--env",
        f"PID_DIR={pid_dir}",
        str(FIXTURES / "fail.py"),
        "99",
        "raise",
    )
    try:
        files = wait_until(
            lambda: len(list(pid_dir.glob("*.pid"))) == 2 and list(pid_dir.glob("*.pid")),
            timeout=60,
            what="both ranks",
        )
        pids = [int(f.read_text()) for f in files]
        wait_until(lambda: cli.status(handle)["state"] == "RUNNING", what="RUNNING")
        cli("stop", handle, check=True)
        status = cli.wait(handle)
        assert status["state"] == "CANCELLED"
        wait_until(lambda: not pids_alive(pids), timeout=10, what="every rank to be gone")
    finally:
        cli("stop", handle)  # a failed assertion must not leave the app running
