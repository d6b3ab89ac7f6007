"""Per-rank progress from file modification times: stalls, partial stalls, stragglers."""

from __future__ import annotations

import os
from pathlib import Path

from trainlaunch.diagnosis.values import duration
from trainlaunch.stacks.progress import RankProgress, progress_rows, stall_message

NOW = 1_000_000.0


def rank(tmp_path: Path, r: int, idle: float, running: bool = True) -> RankProgress:
    f = tmp_path / f"rank{r}.log"
    f.write_text("x")
    os.utime(f, (NOW - idle, NOW - idle))
    return RankProgress(r, "trainer", 0, 100 + r, None, running, None, NOW - 3600, (f,))


def test_all_ranks_quiet_is_a_stall(tmp_path: Path) -> None:
    ranks = [rank(tmp_path, r, 700 + r) for r in range(4)]
    assert stall_message(ranks, 600, NOW) == ("stalled for 11m: no output or metrics from any rank")


def test_some_ranks_quiet_is_shown_per_rank(tmp_path: Path) -> None:
    ranks = [
        rank(tmp_path, 0, 1),
        rank(tmp_path, 1, 960),
        rank(tmp_path, 2, 2),
        rank(tmp_path, 5, 700),
    ]
    assert stall_message(ranks, 600, NOW) == (
        "ranks 1,5 without progress for 16m (others progressing)"
    )
    rows = {p["rank"]: p for p in progress_rows(ranks, NOW, 600)}
    assert [rows[r]["stalled"] for r in (0, 1, 2, 5)] == [False, True, False, True]
    assert rows[1]["idle_s"] == 960.0


def test_exited_ranks_and_no_timeout_never_stall(tmp_path: Path) -> None:
    ranks = [rank(tmp_path, 0, 5000, running=False), rank(tmp_path, 1, 1)]
    assert stall_message(ranks, 600, NOW) == ""
    assert stall_message([rank(tmp_path, 2, 5000)], None, NOW) == ""
    assert progress_rows(ranks, NOW)[0]["idle_s"] is None


def test_missing_files_fall_back_to_the_attempt_start(tmp_path: Path) -> None:
    r = RankProgress(0, "t", 0, 1, None, True, None, NOW - 30, (tmp_path / "nope",))
    assert r.last_progress() == NOW - 30


def test_durations() -> None:
    assert [duration(s) for s in (5, 119, 120, 7199, 7260)] == ["5s", "119s", "2m", "119m", "2h01m"]
