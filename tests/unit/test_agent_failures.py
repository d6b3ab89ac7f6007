"""Root cause: first failure, torchelastic-shaped record, traceback with or without @record."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from trainlaunch.agent.failures import Failure, error_record, root_cause, summary

TRACE = (
    'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
    "    main()\nValueError: boom\n"
)


def failure(
    tmp_path: Path,
    rank: int,
    code: int = 1,
    observed: float = 100.5,
    order: int = 0,
    reply: dict | None = None,
    tail: str = "",
) -> Failure:
    err = tmp_path / f"{rank}.json"
    if reply is not None:
        err.write_text(json.dumps(reply))
    return Failure(
        rank=rank,
        local_rank=rank,
        node_rank=0,
        pid=1000 + rank,
        exit_code=code,
        observed=observed,
        order=order,
        attempt=0,
        error_file=str(err),
        stderr_file=str(tmp_path / "stderr.log"),
        stderr_tail=tail,
    )


def test_without_record_the_stderr_tail_is_the_traceback(tmp_path: Path) -> None:
    rec = error_record(failure(tmp_path, 1, tail="noise\n" + TRACE))
    assert rec["message"]["message"] == "ValueError: boom"
    assert rec["message"]["extraInfo"]["py_callstack"].endswith(TRACE.rstrip("\n"))
    assert rec["message"]["extraInfo"]["timestamp"] == "100"
    assert rec["errorCode"] == rec["message"]["errorCode"] == 1
    assert (rec["rank"], rec["local_rank"], rec["exit_code"], rec["signal"]) == (1, 1, 1, None)
    assert rec["error_file"] is None  # no reply file was written: never "<N/A>"


def test_with_record_the_reply_file_wins(tmp_path: Path) -> None:
    reply = {
        "message": {
            "message": "KeyError: 'x'",
            "extraInfo": {"py_callstack": "Traceback...KeyError: 'x'", "timestamp": "90"},
        }
    }
    f = failure(tmp_path, 0, reply=reply, tail="unrelated\n")
    rec = error_record(f)
    assert rec["message"]["message"] == "KeyError: 'x'"
    assert rec["message"]["extraInfo"]["py_callstack"] == "Traceback...KeyError: 'x'"
    assert rec["message"]["extraInfo"]["timestamp"] == "90"
    assert rec["error_file"] == f.error_file


def test_signal_is_named_and_exit_code_is_128_plus_n(tmp_path: Path) -> None:
    f = failure(tmp_path, 2, code=-9)
    rec = error_record(f)
    assert (f.signal, f.shell_code, rec["exit_code"], rec["errorCode"]) == ("SIGKILL", 137, 137, -9)
    assert rec["message"]["message"] == "Signal 9 (SIGKILL) received by PID 1002"
    assert "killed by SIGKILL" in summary("t.py", f, [], 0, 0)


def test_plain_exit_code_message(tmp_path: Path) -> None:
    assert error_record(failure(tmp_path, 0, code=3, tail="warn\n"))["message"]["message"] == (
        "exited with code 3"
    )


def test_root_cause_is_the_earliest_then_the_first_reaped(tmp_path: Path) -> None:
    early_file = failure(
        tmp_path,
        3,
        order=5,
        reply={"message": {"message": "E", "extraInfo": {"py_callstack": "", "timestamp": "99"}}},
    )
    later = failure(tmp_path, 0, observed=100.9, order=0)
    assert root_cause([later, early_file]) is early_file
    a, b = failure(tmp_path, 0, order=2), failure(tmp_path, 1, order=1)
    assert root_cause([a, b]) is b  # same second: the kernel reported b's exit first


def test_summary_shows_rank_how_and_traceback(tmp_path: Path) -> None:
    root = failure(tmp_path, 1, tail=TRACE)
    text = summary("train.py", root, [failure(tmp_path, 0, code=-15)], 1, 2)
    assert "train.py FAILED (restarts: 1/2)" in text
    host = socket.gethostname()
    assert f"rank 1 (local_rank 1, node 0, host {host}, pid 1001) exited with code 1" in text
    assert "ValueError: boom" in text and 'File "train.py", line 3' in text
    assert "also failed: rank 0 (local_rank 0) killed by SIGTERM" in text
    assert "<N/A>" not in text


def deep_trace(frames: int, noise: int) -> str:
    """A traceback through `frames` frames (the HF Trainer's are ~40), then teardown noise."""
    lines = ["[rank1]: Traceback (most recent call last):"]
    for i in range(frames):
        lines += [
            f'[rank1]:   File "trainer.py", line {100 + i}, in step_{i}',
            f"[rank1]:     step_{i + 1}()",
        ]
    lines.append("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    lines += [f"wandb: teardown line {i}" for i in range(noise)]
    return "\n".join(lines) + "\n"


def test_a_traceback_far_above_the_end_is_still_the_headline(tmp_path: Path) -> None:
    text = deep_trace(40, 5)
    (tmp_path / "stderr.log").write_text(text)
    tail = "".join(text.splitlines(keepends=True)[-20:])  # the agent keeps 20 lines
    f = failure(tmp_path, 1, tail=tail)
    rec = error_record(f)
    assert rec["message"]["message"] == (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    )
    trace = rec["message"]["extraInfo"]["py_callstack"]
    assert trace.startswith("Traceback (most recent call last):") and "step_0" in trace
    assert "wandb" not in trace  # what came after the exception is not part of it
    text = summary("train.py", f, [], 0, 0, stopped=[0, 2, 3])
    assert "  torch.OutOfMemoryError: CUDA out of memory" in text
    assert text.rstrip().endswith("stopped because of it: ranks 0,2-3")
