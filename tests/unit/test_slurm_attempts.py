"""The Slurm attempt history: the batch script's lines and the reasons read from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainlaunch.schedulers.slurm.attempts import seconds_left, signal_seconds, with_history
from trainlaunch.specs import AppState, AppStatus


@pytest.mark.parametrize(
    ("text", "want"),
    [("0:21", 21), ("1:00:05", 3605), ("2-01:00:00", 176400), ("UNLIMITED", None), ("", None)],
)
def test_seconds_left(text: str, want: int | None) -> None:
    assert seconds_left(text) == want


def test_signal_seconds() -> None:
    assert (signal_seconds("USR1@90"), signal_seconds("USR2"), signal_seconds("none")) == (
        90,
        60,
        None,
    )


def _history(tmp_path: Path, lines: list[str], state: str, signal: str = "USR1@20") -> AppStatus:
    (tmp_path / "attempts").write_text("".join(ln + "\n" for ln in lines))
    base = AppStatus(AppState.SUCCEEDED, num_restarts=9, msg=f"slurm job 1 {state}")
    return with_history(base, tmp_path, state, signal)


def test_time_limit_requeue_then_success(tmp_path: Path) -> None:
    st = _history(
        tmp_path,
        [
            "attempt=0 start=10.0",
            "attempt=0 end=40.5 exit=75 action=requeue term=0 left=0:21",
            "attempt=1 start=50.0",
            "attempt=1 end=55.0 exit=0 action=end term=0 left=0:57",
        ],
        "COMPLETED",
    )
    assert (st.num_requeues, st.num_restarts) == (1, 0)
    assert [(a.attempt, a.reason, a.start, a.end, a.exit_code) for a in st.attempts] == [
        (0, "time limit (saved, requeued)", 10.0, 40.5, 75),
        (1, "succeeded", 50.0, 55.0, 0),
    ]


def test_requeue_by_slurm_retry_and_pending_next_attempt(tmp_path: Path) -> None:
    st = _history(
        tmp_path,
        [
            "attempt=0 start=1",
            "attempt=0 end=2 exit=75 action=end term=1 left=5:00",
            "attempt=1 start=3",
            "attempt=1 end=4 exit=3 action=retry term=0 left=4:00",
        ],
        "PENDING",
    )
    reasons = [a.reason for a in st.attempts]
    assert reasons == ["preempted (requeued by slurm)", "failed (exit 3; retried)", ""]
    assert (st.num_requeues, st.num_restarts) == (1, 1)


def test_timeout_message_says_what_to_do(tmp_path: Path) -> None:
    st = _history(tmp_path, ["attempt=0 start=1"], "TIMEOUT")
    assert [a.reason for a in st.attempts] == ["timeout"]
    assert "warned 20 s before" in st.msg and "exit 75" in st.msg


def test_no_history_file_leaves_the_status_alone(tmp_path: Path) -> None:
    base = AppStatus(AppState.RUNNING, num_restarts=2)
    assert with_history(base, tmp_path, "RUNNING", None) is base


def test_a_hang_restart_counts_as_a_restart(tmp_path: Path) -> None:
    st = _history(
        tmp_path,
        [
            "attempt=0 start=1",
            "attempt=0 hang=1",
            "attempt=0 end=2 exit=143 action=end term=1 left=5:00",
            "attempt=1 start=3",
        ],
        "RUNNING",
    )
    assert [a.reason for a in st.attempts] == ["hung (restarted)", ""]
    assert (st.num_requeues, st.num_restarts) == (0, 1)
