"""The pure part of `trainlaunch stack`: py-spy JSON parsed, ranks grouped and rendered."""

from __future__ import annotations

import json

import pytest

from trainlaunch.ranklist import RankRanges
from trainlaunch.stacks.values import (
    Frame,
    RankStack,
    ThreadStack,
    group,
    parse_pyspy_json,
    parse_rank_list,
    rank_list,
    render_text,
    summary_lines,
)

TORCH = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def pyspy(pid: int, frames: list[tuple[str, str, int]], name: str | None = None) -> str:
    """What `py-spy dump --json` prints for one thread (the fields trainlaunch reads)."""
    return json.dumps(
        [
            {
                "pid": pid,
                "thread_id": 1000 + pid,  # differs per process: must not split groups
                "thread_name": name,
                "os_thread_id": pid,
                "active": False,
                "owns_gil": False,
                "frames": [
                    {"name": n, "filename": f, "short_filename": f, "line": ln, "locals": None}
                    for n, f, ln in frames
                ],
            }
        ]
    )


COLLECTIVE = [
    ("all_reduce", TORCH, 2950),
    ("wrapper", "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", 81),
    ("<module>", "/home/u/train.py", 41),
]
SLEEP = [("load", "/home/u/data.py", 12), ("<module>", "/home/u/train.py", 33)]


def rank(r: int, frames: list[tuple[str, str, int]]) -> RankStack:
    return RankStack(rank=r, threads=parse_pyspy_json(pyspy(100 + r, frames)), pid=100 + r)


def test_identical_stacks_group_and_the_odd_rank_comes_first() -> None:
    stacks = [rank(r, SLEEP if r == 1 else COLLECTIVE) for r in range(8)]
    groups = group(stacks)
    assert summary_lines(groups) == [
        "rank 1: load at data.py:12",
        "ranks 0,2-7: all_reduce at train.py:41",
    ]
    text = render_text(groups)
    assert f"        all_reduce ({TORCH}:2950)" in text
    assert text.index("load (/home/u/data.py:12)") < text.index("<module> (/home/u/train.py:33)")


def test_main_thread_is_named_from_the_pid_and_listed_first() -> None:
    doc = json.loads(pyspy(7, SLEEP)) + json.loads(pyspy(8, COLLECTIVE, name="pin_memory"))
    doc[1]["pid"] = 7
    threads = parse_pyspy_json(json.dumps(doc[::-1]))
    assert [t.name for t in threads] == ["MainThread", "pin_memory"]


def test_exited_and_failed_ranks_have_their_own_groups() -> None:
    stacks = [
        rank(0, COLLECTIVE),
        RankStack(rank=1, state="exited", exit_code=3),
        RankStack(rank=2, state="error", error="py-spy: Permission denied"),
        rank(3, COLLECTIVE),
    ]
    assert summary_lines(group(stacks)) == [
        "rank 1: exited with code 3",
        "rank 2: no stack: py-spy: Permission denied",
        "ranks 0,3: all_reduce at train.py:41",
    ]


def test_a_hang_dump_round_trips_through_json() -> None:
    s = rank(4, COLLECTIVE)
    assert RankStack.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_headline_of_a_thread_without_user_frames_is_its_innermost_frame() -> None:
    t = ThreadStack("MainThread", (Frame("wait", "/usr/lib/python3.11/threading.py", 320),))
    assert RankStack(rank=0, threads=(t,)).headline() == "wait at threading.py:320"


@pytest.mark.parametrize(
    ("ranks", "text"),
    [([0], "0"), ([0, 2, 3, 4, 5, 6, 7], "0,2-7"), ([3, 1, 2, 9], "1-3,9"), ([], "")],
)
def test_rank_lists(ranks: list[int], text: str) -> None:
    assert rank_list(ranks) == text
    if ranks:
        assert parse_rank_list(text) == frozenset(ranks)


@pytest.mark.parametrize("bad", ["x", "3-1", "-1", "1,,2", "1-"])
def test_bad_rank_lists_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a rank or range"):
        parse_rank_list(bad)
    with pytest.raises(ValueError, match="not a rank or range"):
        RankRanges(bad)


def test_a_huge_range_costs_what_the_app_has() -> None:
    # issue 23 #10: `stack --rank 0-99999999999` grew until MemoryError
    assert parse_rank_list("0-99999999999,5", world=4) == frozenset({0, 1, 2, 3})
    assert parse_rank_list("7-99999999999", world=4) == frozenset()
    asked = RankRanges("1,3-99999999999")
    assert 1 in asked and 10**10 in asked and 0 not in asked and 2 not in asked
    assert asked.beyond(8) == "8-99999999999" and RankRanges("0-3").beyond(8) == ""


def test_output_that_is_not_py_spy_json_is_an_error() -> None:
    with pytest.raises(ValueError, match="no JSON"):
        parse_pyspy_json("Error: failed to find python interpreter")


def test_srun_label_pieces_are_put_back_together_per_task() -> None:
    from trainlaunch.schedulers.slurm.stacks import task_outputs

    # srun --label cuts each task's long line into 1 KiB pieces and interleaves the tasks'
    one, two = '[{"rank": 0, "x": "' + "a" * 1500 + '"}]', '[{"rank": 2, "y": " b"}]'
    pieces = [f"0: {one[:1024]}", f"1: {two}", f"0: {one[1024:]}"]
    assert sorted(task_outputs("\n".join(pieces) + "\n")) == sorted([one, two])
    assert task_outputs(" 3: [] \n") == ["[] "]  # ten tasks or more: a padded label
