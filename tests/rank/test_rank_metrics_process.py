"""MetricLogger across real processes: SIGTERM, kill -9, interpreter exit, a gloo group."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

# A child that logs forever with a big buffer, after saying "ready" once `ready_at` records are in.
LOG_FOREVER = """
    import sys
    from trainlaunch.rank.metrics import MetricLogger, MetricsSample
    {prelude}
    logger = MetricLogger(sys.argv[1] if len(sys.argv) > 1 else {path!r}, buffer_size={buffer})
    step = 0
    while True:
        logger.log(MetricsSample(step, 0, {{"loss": 1.0 / (step + 1), "step_id": step}}))
        step += 1
        if step == {ready_at}:
            print("ready", flush=True)
            {after_ready}
"""


def lines_of(path: Path) -> tuple[list[dict[str, Any]], str]:
    """Complete lines parsed (each must be a JSON object), and any unterminated tail."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    complete, _, tail = text.rpartition("\n")
    rows = [json.loads(line) for line in complete.splitlines()] if complete else []
    assert all(isinstance(row, dict) for row in rows)
    return rows, tail


def assert_consecutive_steps(rows: list[dict[str, Any]]) -> None:
    """Records are written in order, none lost in the middle, none repeated."""
    assert [row["step"] for row in rows] == list(range(len(rows)))
    assert all(row["step_id"] == row["step"] for row in rows)


def child(helpers: Any, tmp_path: Path, **fmt: Any) -> subprocess.Popen[str]:
    params = {"prelude": "", "after_ready": "pass", "buffer": 1000, "ready_at": 250}
    params.update(fmt, path=str(tmp_path / "m.jsonl"))
    proc = helpers.start_child(LOG_FOREVER.format(**params))
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the child has logged `ready_at` records
    assert line == "ready\n", proc.stderr.read() if proc.stderr else line
    return proc


def test_sigterm_writes_the_buffer_then_dies_by_the_signal(helpers: Any, tmp_path: Path) -> None:
    proc = child(helpers, tmp_path, after_ready="sys.stdin.readline()")
    assert lines_of(tmp_path / "m.jsonl")[0] == []  # all 250 records are still buffered
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM  # chained to the default action
    rows, tail = lines_of(tmp_path / "m.jsonl")
    assert tail == "" and len(rows) == 250
    assert_consecutive_steps(rows)


def test_sigterm_while_logging_keeps_every_record_in_order(helpers: Any, tmp_path: Path) -> None:
    # The signal usually lands inside log(), often with the lock held: the flush is deferred
    # until the lock is released, and must neither lose nor repeat a record.
    proc = child(helpers, tmp_path, buffer=64)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    rows, tail = lines_of(tmp_path / "m.jsonl")
    assert tail == "" and len(rows) >= 250
    assert_consecutive_steps(rows)


def test_sigterm_chains_to_a_previous_python_handler(helpers: Any, tmp_path: Path) -> None:
    prelude = (
        "import signal, os\n    signal.signal(signal.SIGTERM, "
        "lambda s, f: (print('previous handler', flush=True), os._exit(7)))"
    )
    proc = child(helpers, tmp_path, prelude=prelude)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 7
    assert proc.stdout is not None and proc.stdout.read() == "previous handler\n"
    rows, _ = lines_of(tmp_path / "m.jsonl")
    assert len(rows) >= 250
    assert_consecutive_steps(rows)


def test_sigterm_when_ignored_flushes_and_lets_the_process_live(
    helpers: Any, tmp_path: Path
) -> None:
    proc = child(
        helpers,
        tmp_path,
        prelude="import signal\n    signal.signal(signal.SIGTERM, signal.SIG_IGN)",
        after_ready="sys.stdin.readline(); logger.close(); print(step, flush=True); break",
        ready_at=100,
    )
    proc.send_signal(signal.SIGTERM)
    helpers.wait_for(
        lambda: len(lines_of(tmp_path / "m.jsonl")[0]) == 100, 30, "the flush on SIGTERM"
    )
    assert proc.poll() is None, "an ignored SIGTERM must not end the process"
    out, _ = proc.communicate("go\n", timeout=30)
    assert proc.returncode == 0 and out == "100\n"
    rows, _ = lines_of(tmp_path / "m.jsonl")
    assert len(rows) == 100
    assert_consecutive_steps(rows)


def test_kill_9_loses_at_most_the_buffer_and_never_earlier_lines(
    helpers: Any, tmp_path: Path
) -> None:
    path = tmp_path / "m.jsonl"
    proc = child(helpers, tmp_path, buffer=10, ready_at=2000)
    helpers.wait_for(lambda: len(lines_of(path)[0]) >= 2000, 30, "2000 lines on disk")
    proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL
    rows, tail = lines_of(path)
    assert len(rows) >= 2000
    assert_consecutive_steps(rows)
    # A kill can cut the last write short: only an unterminated tail of a record may remain.
    assert tail == "" or tail.startswith('{"step":')


@pytest.mark.parametrize(
    "ending", ["pass", "import sys; sys.exit(3)", "raise RuntimeError('boom')"]
)
def test_interpreter_exit_writes_the_buffer(helpers: Any, tmp_path: Path, ending: str) -> None:
    code = f"""
        from trainlaunch.rank.metrics import MetricLogger, MetricsSample
        logger = MetricLogger({str(tmp_path / "m.jsonl")!r}, buffer_size=100)
        for step in range(37):
            logger.log(MetricsSample(step, 0, {{"step_id": step}}))
        {ending}
    """
    result = helpers.run_child(code)
    assert result.returncode in (0, 1, 3)
    rows, tail = lines_of(tmp_path / "m.jsonl")
    assert tail == "" and len(rows) == 37
    assert_consecutive_steps(rows)


DIST_CHILD = """
    import os, sys
    import torch.distributed as dist
    from trainlaunch.rank.metrics import MetricLoggerDist, MetricsSample, build_metric_logger
    shared, own = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == 0:
        logger = build_metric_logger(shared, append=False, buffer_size=2)
        assert type(logger) is MetricLoggerDist, type(logger)
        for step in range(5):
            logger.log(MetricsSample(step, 0, {"step_id": step}))
        logger.flush()
    dist.barrier()  # rank 1 builds its loggers only after rank 0 wrote (upstream truncated here)
    if rank == 1:
        late = MetricLoggerDist(shared, append=False)
        late.log(MetricsSample(99, 0, {"step_id": 99}))
        late.close()
        mine = MetricLoggerDist(own)
        mine.log(MetricsSample(0, 0, {"x": 1.0}))
        mine.flush()
        mine.close()
        assert not mine.enabled
        open_files = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                open_files.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                pass  # the descriptor listdir itself used is gone already
        assert not any(path.endswith(".jsonl") for path in open_files), open_files
    dist.barrier()
    if rank == 0:
        for step in range(5, 8):
            logger.log(MetricsSample(step, 0, {"step_id": step}))
        logger.close()
    dist.destroy_process_group()
    print("ok", rank, flush=True)
"""


def test_dist_logger_writes_on_rank_0_only_in_a_real_gloo_group(
    helpers: Any, tmp_path: Path
) -> None:
    shared, own = tmp_path / "shared.jsonl", tmp_path / "rank1-only.jsonl"
    port = str(helpers.free_port())
    procs = []
    for rank in (0, 1):
        env = helpers.child_env(
            RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", textwrap.dedent(DIST_CHILD), str(shared), str(own)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )  # fmt: skip
        )
    outs = [proc.communicate(timeout=120) for proc in procs]
    for rank, (proc, (out, err)) in enumerate(zip(procs, outs, strict=True)):
        assert proc.returncode == 0 and out == f"ok {rank}\n", err
    assert not own.exists(), "a non-zero rank must not create its file"
    raw = shared.read_bytes()
    assert b"\0" not in raw
    rows, tail = lines_of(shared)
    assert tail == "" and [row["step"] for row in rows] == list(range(8))
