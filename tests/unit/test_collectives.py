"""The collective view of a hang from Flight Recorder dumps (pure; dumps shaped as torch 2.13's
gloo ones, tests/process/test_stack_hang.py takes them from real ranks)."""

from __future__ import annotations

from typing import Any

from trainlaunch.stacks.collectives import from_stacks, human_bytes, report
from trainlaunch.stacks.values import EXITED, Frame, RankStack, ThreadStack


def entry(seq: int, retired: bool, op: str = "all_reduce", size: int = 1024) -> dict[str, Any]:
    return {
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "is_p2p": False,
        "pg_id": 0,
        "process_group": ["0", "default_pg"],
        "profiling_name": f"gloo:{op}",
        "input_sizes": [[size]],
        "input_dtypes": ["Float"],
        "retired": retired,
        "state": "scheduled",
    }


def dump(completed: int, waiting: int | None, op: str = "all_reduce") -> dict[str, Any]:
    entries = [entry(s, True) for s in range(max(1, completed - 2), completed + 1)]
    if waiting is not None:
        entries.append(entry(waiting, False, op))
    last = waiting if waiting is not None else completed
    return {
        "entries": entries,
        "pg_status": {
            "0": {
                "last_enqueued_collective": str(last),
                "last_completed_collective": str(completed),
            }
        },
    }


def at(rank: int, fn: str, line: int) -> RankStack:
    frames = (
        Frame(fn, "/venv/lib/python3.11/site-packages/torch/x.py", 9),
        Frame("<module>", "/w/train.py", line),
    )
    return RankStack(
        rank, threads=(ThreadStack("MainThread", frames if fn != "<module>" else frames[1:]),)
    )


def test_ranks_waiting_and_the_one_that_never_entered() -> None:
    dumps = {0: dump(37, 38), 1: dump(37, None), 2: dump(37, 38), 3: dump(37, 38)}
    stacks = {0: at(0, "all_reduce", 41), 1: at(1, "<module>", 33), 2: at(2, "all_reduce", 41)}
    r = report(dumps, stacks)
    assert r.lines == (
        "ranks 0,2-3 wait in all_reduce #38 (pg 0, 4 KiB); rank 1 last completed #37 and is at "
        "train.py:33",
    )
    [group] = r.groups
    assert group["waiting"] == [{"op": "all_reduce", "seq": 38, "bytes": 4096, "ranks": [0, 2, 3]}]
    assert group["behind"] == [{"rank": 1, "last_completed": 37, "at": "train.py:33"}]


def test_every_rank_in_it_and_mismatched_collectives() -> None:
    both = report({0: dump(5, 6), 1: dump(5, 6)}, {})
    assert both.lines == ("ranks 0-1 wait in all_reduce #6 (pg 0, 4 KiB); every rank entered it",)
    odd = report({0: dump(5, 6), 1: dump(5, 6, "broadcast"), 2: dump(5, 6)}, {})
    assert odd.lines[0].endswith("the ranks do not call the same collective")
    assert odd.lines[0].startswith("ranks 0,2 wait in all_reduce #6")


def test_no_collective_waiting_and_missing_dumps() -> None:
    r = report({0: dump(9, None), 1: None}, {}, {1: "the rank serves no flight recorder"})
    assert r.lines[0].startswith("no rank waits in a collective (the last completed: #9)")
    assert r.lines[1] == "rank 1: no flight recorder dump (the rank serves no flight recorder)"


def test_unavailable_falls_back_to_the_stacks_and_says_so() -> None:
    off = from_stacks([RankStack(0), RankStack(1)])
    assert off.lines == () and off.unavailable.startswith("flight recorder unavailable (off")
    dead = from_stacks([RankStack(0, recorder_error="refused"), RankStack(1, state=EXITED)])
    assert dead.unavailable == "flight recorder unavailable (refused): showing stacks"


def test_sizes() -> None:
    assert [human_bytes(n) for n in (4, 4096, 1536 * 1024, 3 << 30)] == [
        "4 B",
        "4 KiB",
        "1.5 MiB",
        "3 GiB",
    ]
