"""`trainlaunch stack` and the local hang watchdog, on real dist.ddp jobs (gloo on CPU)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI, processes_with_env, wait_until
from trainlaunch.stacks.dump import Target, dump

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ddp"
HANG = FIXTURES / "hang.py"
SILENT = FIXTURES / "silent.py"


def marked_line(path: Path, mark: str) -> int:
    """The line number of the fixture line carrying `# MARK: <mark>`."""
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if f"MARK: {mark}" in line:
            return i
    raise AssertionError(f"no mark {mark!r} in {path}")


def groups(cli: CLI, handle: str) -> dict[tuple[int, ...], str]:
    """`stack --json` as {ranks: headline}."""
    doc = json.loads(cli("stack", "--json", handle, check=True).stdout)
    return {tuple(g["ranks"]): g["headline"] for g in doc["groups"]}


def ready(cli: CLI, handle: str, n: int) -> bool:
    return cli("logs", handle).stdout.count(" ready") >= n


def app_pids(handle: str) -> list[int]:
    return processes_with_env("TRAINLAUNCH_APP_ID", handle.rsplit("/", 1)[1])


@pytest.mark.slow
def test_hung_rank_stands_out_and_the_watchdog_reports_it(cli: CLI) -> None:
    sleep_line, collective_line = marked_line(HANG, "the odd rank"), marked_line(HANG, "the others")
    expected = {
        (1,): f"<module> at hang.py:{sleep_line}",
        (0, 2, 3): f"all_reduce at hang.py:{collective_line}",
    }
    handle = cli.run("--cfg", "hang_timeout=6", "dist.ddp", "--nproc", "4", str(HANG))
    try:
        wait_until(lambda: ready(cli, handle, 4), timeout=180, interval=0.5, what="4 ranks ready")
        seen = wait_until(
            lambda: (g := groups(cli, handle)) == expected and g,
            timeout=30,
            interval=0.5,
            what=f"stack groups {expected}",
        )
        assert seen == expected
        text = cli("stack", handle, check=True).stdout
        assert f"ranks 0,2-3: all_reduce at hang.py:{collective_line}" in text
        assert f"rank 1: <module> at hang.py:{sleep_line}" in text
        assert f"{HANG}:{collective_line})" in text  # full frames: file:line
        only = json.loads(cli("stack", "--json", "--rank", "1", handle, check=True).stdout)
        assert [g["ranks"] for g in only["groups"]] == [[1]]
        # the watchdog: within hang_timeout + a few seconds after the last output
        status = wait_until(
            lambda: (s := cli.status(handle))["hang"] and s, timeout=30, what="the hang record"
        )
        assert status["state"] == "RUNNING"
        assert status["stall"].startswith("stalled for ")
        assert status["stall"].endswith("no output or metrics from any rank")
        assert all(p["stalled"] and p["idle_s"] >= 6 for p in status["progress"])
        hang = status["hang"]
        assert hang["action"] == "none" and sorted(hang["summary"]) == sorted(
            f"{'rank 1' if k == (1,) else 'ranks 0,2-3'}: {v}" for k, v in expected.items()
        )
        dump_text = Path(hang["dump"]).read_text()
        assert f"ranks 0,2-3: all_reduce at hang.py:{collective_line}" in dump_text
        plain = cli("status", handle, check=True).stdout
        assert "RUNNING (stalled for" in plain and hang["dump"] in plain
        # torch's Flight Recorder (on with hang_timeout): the collective and the missing rank
        story = (
            "ranks 0,2-3 wait in all_reduce #4 (pg 0, 4 B); rank 1 last completed #3 and is "
            f"at hang.py:{sleep_line}"
        )
        assert hang["collectives"]["lines"] == [story], hang["collectives"]
        assert story in plain and f"# {story}" in dump_text
        shown = cli("stack", "--collectives", "--summary", handle, check=True).stdout
        assert shown.splitlines()[0] == story
        doc = json.loads(cli("stack", "--collectives", "--json", "--rank", "1", handle).stdout)
        [pg] = doc["collectives"]["groups"]
        assert pg["waiting"][0]["ranks"] == [0, 2, 3] and pg["behind"][0]["rank"] == 1
    finally:
        cli("stop", handle)


@pytest.mark.slow
def test_hung_ddp_job_is_restarted_then_stopped_with_no_process_left(cli: CLI) -> None:
    handle = cli.run(
        "--hang-timeout",
        "5",
        "--on-hang",
        "restart",
        "dist.ddp",
        "--max_retries",
        "1",
        "--nproc",
        "4",
        str(HANG),
    )
    try:
        restarted = wait_until(
            lambda: (s := cli.status(handle))["num_restarts"] == 1 and s,
            timeout=240,
            interval=0.5,
            what="the restart after the first hang",
        )
        assert restarted["hang"]["hangs"] == 1 and restarted["hang"]["action"] == "restart"
        assert "restarts: 1" in cli("status", handle, check=True).stdout
        status = cli.wait(handle, timeout=240)  # hangs again: no restart left, so stopped
        assert status["state"] == "FAILED" and status["num_restarts"] == 1
        assert status["hang"]["hangs"] == 2 and status["hang"]["action"] == "stop"
        assert "ranks 0,2-3: all_reduce at hang.py:" in Path(status["hang"]["dump"]).read_text()
        wait_until(lambda: not app_pids(handle), timeout=10, what="no process of the app")
    finally:
        cli("stop", handle)


def test_without_the_recorder_stack_says_so_and_shows_the_stacks(cli: CLI) -> None:
    handle = cli.run("dist.ddp", "--nproc", "2", str(SILENT))
    try:
        wait_until(lambda: cli("logs", handle).stdout.count("started") == 2, what="2 ranks")
        out = cli("stack", "--collectives", "--summary", handle, check=True).stdout.splitlines()
        assert out[0] == (
            "flight recorder unavailable (off for this app: --hang-timeout turns it on): "
            "showing stacks"
        )
        assert out[1].startswith("ranks 0-1: ")
    finally:
        cli("stop", handle)


def test_on_hang_stop_ends_the_app_and_leaves_no_process(cli: CLI) -> None:
    handle = cli.run(
        "--cfg", "hang_timeout=2,on_hang=stop", "dist.ddp", "--nproc", "2", str(SILENT)
    )
    try:
        status = cli.wait(handle, timeout=90)
        assert status["state"] == "FAILED", status
        assert status["msg"].startswith("hung: no output or metrics from any rank for")
        assert Path(status["hang"]["dump"]).is_file()
        assert status["hang"]["action"] == "stop"
        assert status["failure"]["kind"] == "stopped"  # docs/failures.md: who stopped it
        assert status["failure"]["line"].startswith(
            "stopped by the hang watchdog: no output or metrics from any rank for "
        )
        wait_until(lambda: not app_pids(handle), timeout=10, what="no process of the app")
    finally:
        cli("stop", handle)


@pytest.mark.slow  # 5 s serially on a busy 2-core machine (--durations)
def test_on_hang_restart_counts_as_a_restart(cli: CLI) -> None:
    handle = cli.run(
        "--cfg",
        "hang_timeout=2,on_hang=restart",
        "dist.ddp",
        "--max_retries",
        "1",
        "--nproc",
        "2",
        str(SILENT),
    )
    try:
        restarted = wait_until(
            lambda: (s := cli.status(handle))["num_restarts"] == 1 and s,
            timeout=90,
            what="one restart after the first hang",
        )
        assert restarted["hang"]["action"] == "restart"
        # the second hang finds no restart left: the app is stopped
        status = cli.wait(handle, timeout=90)
        assert status["state"] == "FAILED" and status["num_restarts"] == 1
        assert status["hang"]["hangs"] == 2 and status["hang"]["action"] == "stop"
        assert cli("status", handle).stdout.count("restarts") >= 1
        wait_until(lambda: not app_pids(handle), timeout=10, what="no process of the app")
    finally:
        cli("stop", handle)


@pytest.mark.slow  # 9 s each serially on a busy 2-core machine (--durations)
@pytest.mark.parametrize("progress", ["heartbeat", "metrics"])
def test_a_quiet_job_that_beats_or_logs_metrics_is_never_flagged(cli: CLI, progress: str) -> None:
    handle = cli.run(
        "--cfg",
        "hang_timeout=3",
        "dist.ddp",
        "--nproc",
        "2",
        "--env",
        f"SECONDS_TO_RUN=8,PROGRESS={progress}",
        str(FIXTURES / "quiet_heartbeat.py"),
    )
    seen: list[dict[str, Any]] = []

    def done() -> bool:
        s = cli.status(handle)
        seen.append(s)
        return bool(s["is_terminal"])

    wait_until(done, timeout=90, interval=0.3, what="the quiet job to end")
    assert seen[-1]["state"] == "SUCCEEDED", seen[-1]
    assert any(s["progress"] for s in seen), "status never showed per-rank progress"
    assert not any(s["stall"] for s in seen) and seen[-1]["hang"] is None
    app_dir = cli.home / "apps" / handle.rsplit("/", 1)[1]
    made = "metrics/rank1.jsonl" if progress == "metrics" else "heartbeat/rank1"
    assert (app_dir / made).is_file(), f"{progress} left no {made}"


def test_stack_shows_an_exited_rank_with_its_code(cli: CLI) -> None:
    handle = cli.run("dist.ddp", "--nproc", "3", "--env", "EXIT_RANK=1", str(SILENT))
    try:

        def dumped() -> dict[str, Any]:
            proc = cli("stack", "--json", handle)  # exit 3 until the agent started its ranks
            return json.loads(proc.stdout) if proc.returncode == 0 else {"ranks": []}

        doc = wait_until(
            lambda: (
                (d := dumped())["ranks"]
                and len(d["ranks"]) == 3
                and d["ranks"][1]["state"] == "exited"
                and all(r["state"] == "running" for r in (d["ranks"][0], d["ranks"][2]))
                and d
            ),
            timeout=60,
            interval=0.3,
            what="rank 1 exited, 0 and 2 running",
        )
        assert doc["ranks"][1]["exit_code"] == 0
        text = cli("stack", "--summary", handle, check=True).stdout
        assert "rank 1: exited with code 0" in text
        assert "ranks 0,2: <module> at silent.py:" in text
    finally:
        cli("stop", handle)


def test_stack_of_a_finished_app_and_of_an_unknown_handle(cli: CLI) -> None:
    handle = cli.run("utils.echo", "--msg", "hi")
    assert cli.wait(handle)["state"] == "SUCCEEDED"
    proc = cli("stack", handle)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (
        f"error: {handle} has ended (SUCCEEDED): no rank left to dump"
    )
    assert "Traceback" not in proc.stderr
    proc = cli("stack", "local://trainlaunch/nope-123")
    assert proc.returncode == 4 and proc.stderr.startswith("error: no local app 'nope-123'")
    assert "Traceback" not in proc.stderr
    proc = cli("stack", "--rank", "x", handle)
    assert proc.returncode == 2 and "--rank: not a rank or range: 'x'" in proc.stderr


def test_a_process_that_exits_before_py_spy_attaches_reads_as_exited() -> None:
    # a real process that is gone by the time py-spy runs (the race `stack` must survive)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    out = dump([Target(rank=5, pid=proc.pid)])
    assert [(s.rank, s.state, s.error) for s in out] == [(5, "exited", "")]


def test_py_spy_dumps_a_live_process_innermost_frame_first(tmp_path: Path) -> None:
    script = tmp_path / "deep.py"
    script.write_text(
        "import sys, time\n"
        "def inner():\n"
        "    print('in', flush=True)\n"
        "    time.sleep(600)\n"
        "def outer():\n"
        "    inner()\n"
        "outer()\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "in\n"
        (stack,) = dump([Target(rank=0, pid=proc.pid, host=os.uname().nodename)])
        frames = [(f.name, f.line) for f in stack.threads[0].frames]
        assert frames == [("inner", 4), ("outer", 6), ("<module>", 7)]
        assert stack.headline() == "inner at deep.py:4"
        (native,) = dump([Target(rank=0, pid=proc.pid)], native=True)
        names = [f.name for f in native.threads[0].frames]
        assert names.index("inner") > 0  # C frames (the sleep) come before the Python ones
        assert native.headline().endswith(" at deep.py:4")
    finally:
        proc.kill()
        proc.wait()


def test_a_rank_that_is_not_python_says_why_even_with_rust_backtrace(cli: CLI) -> None:
    # issue 23 #17: RUST_BACKTRACE=1 made py-spy end with a backtrace: `no stack: py-spy: 10: main`
    handle = cli.run("utils.sleep", "--seconds", "120")
    try:
        wait_until(lambda: app_pids(handle), timeout=30, what="the sleeper")
        reasons = {
            cli("stack", handle, env={"RUST_BACKTRACE": value}, check=True).stdout
            for value in ("1", "full", "0")
        }
        assert len(reasons) == 1, reasons  # py-spy's reason, whatever RUST_BACKTRACE says
        [reason] = reasons
        assert reason.startswith("rank 0: no stack: py-spy: "), reason
        assert not re.search(r"py-spy: (Error: |\d+: )", reason), reason
    finally:
        cli("stop", handle)


SLOW_START = FIXTURES / "slow_start.py"


def test_a_busy_silent_start_is_not_a_hang_and_a_stopped_hang_says_why_everywhere(
    cli: CLI,
) -> None:
    # issue 22 #8: `import torch` on a loaded machine (silent, busy) for longer than
    # hang_timeout was taken for a hang; the ranks now start, print, then hang for real
    handle = cli.run(
        "--cfg", "hang_timeout=2,on_hang=restart", "dist.ddp", "--max_retries", "1",
        "--nproc", "2", "--env", "BUSY_S=5", str(SLOW_START),
    )  # fmt: skip
    try:
        proc = cli("wait", handle, timeout=180)
        logs = cli("logs", handle).stdout
        # both attempts got through their 5 busy seconds: 2 ranks x 2 attempts said started
        assert logs.count(" started") == 4, logs
        status = cli.status(handle)
        assert status["state"] == "FAILED" and status["hang"]["hangs"] == 2
        assert [a["reason"] for a in status["attempts"]] == ["hung (restarted)", "hung"]
        plain = cli("status", handle, check=True).stdout
        assert "    #1   hung " in plain and "failed" not in plain.split("history:")[1]
        # wait says why, in the words status uses
        assert proc.returncode == 1, proc.stderr
        assert f"message:  {status['msg']}" in plain
        assert status["msg"].startswith("hung: no output or metrics from any rank for ")
        assert status["msg"] in proc.stderr, proc.stderr
    finally:
        cli("stop", handle)


def test_run_help_says_what_counts_as_progress(cli: CLI) -> None:
    text = " ".join(cli("run", "--help", check=True).stdout.split())
    assert "no output, metrics or heartbeat from any rank this long" in text
    assert "Until its first line a rank is starting and its CPU time counts too" in text
