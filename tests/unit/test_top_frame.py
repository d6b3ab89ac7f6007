"""`top`'s pure renderers (trainlaunch/cli/top/frame.py) on hand-made board documents."""

from __future__ import annotations

from typing import Any

from trainlaunch.cli.top import frame

RUNNING: dict[str, Any] = {
    "handle": "local://trainlaunch/train-abc",
    "backend": "local",
    "state": "RUNNING",
    "age_s": 754.0,
    "running": True,
    "ranks_alive": 3,
    "world": 4,
    "idle_s": 130.0,
    "stall": "rank 1 without progress for 2m (others progressing)",
    "flags": ["hang #2", "straggler"],
    "requeues": 1,
    "restarts": 0,
    "sweep": None,
    "step": 1200,
    "steps_per_s": 9.87,
    "metric": "loss",
    "metric_value": 0.012345678,
}
FINISHED: dict[str, Any] = {
    "handle": "local://trainlaunch/echo-x",
    "backend": "local",
    "state": "FAILED",
    "age_s": 7300.0,
    "running": False,
    "msg": "exit 3",
}


def plain(cells: list[Any]) -> list[str]:
    return [c.plain for c in cells]


def test_a_running_app_row_shows_its_live_fields() -> None:
    assert plain(frame.app_cells(RUNNING, "loss")) == [
        "local://trainlaunch/train-abc",
        "local",
        "RUNNING",
        "12m",
        "3/4",
        "1200",
        "9.9",
        "0.01235",
        "2m",
        "hang #2, straggler",
        "1",
    ]


def test_a_hang_is_red_and_a_state_has_its_color() -> None:
    cells = frame.app_cells(RUNNING, "loss")
    assert cells[9].style == "bold red" and cells[2].style == "cyan"
    straggler = frame.app_cells({**RUNNING, "flags": ["straggler"]}, "loss")
    assert straggler[9].style == "yellow"


def test_a_finished_app_row_has_its_state_age_and_message_only() -> None:
    assert plain(frame.app_cells(FINISHED)) == [
        "local://trainlaunch/echo-x", "local", "FAILED", "2h01m", "", "", "", "", "", "exit 3", "",
    ]  # fmt: skip


def test_the_metric_column_is_named_after_the_metric_or_each_value_is() -> None:
    both = {"apps": [RUNNING, {**RUNNING, "metric": "val/loss", "metric_value": 2.5}]}
    assert frame.metric_column(both) == "metric"
    assert frame.app_columns(both)[7] == "metric"
    assert frame.app_cells(both["apps"][1], "metric")[7].plain == "val/loss=2.5"
    one = {"apps": [RUNNING, FINISHED]}
    assert frame.app_columns(one) == (
        "handle", "backend", "state", "age", "ranks", "step", "steps/s", "loss", "idle", "flags",
        "requeues",
    )  # fmt: skip


def test_a_sweep_point_app_is_flagged_with_its_sweep() -> None:
    row = {**RUNNING, "flags": [], "sweep": "k3x9"}
    assert frame.app_cells(row, "loss")[9].plain == "sweep k3x9"


def test_the_plain_table_aligns_and_never_cuts_a_handle() -> None:
    long = "slurm://cluster-session-with-a-long-name/1234567_89"
    text = frame.plain_table(("handle", "state"), [[long, "RUNNING"], ["x", "multi\nline"]])
    assert text.splitlines() == [
        "handle" + " " * (len(long) - 4) + "state",
        f"{long}  RUNNING",
        "x" + " " * (len(long) + 1) + "multi line",
    ]


def test_overview_text_has_apps_notes_and_sweeps() -> None:
    doc = {"apps": [RUNNING, FINISHED], "notes": ["slurm: sinfo not found"], "at": 0}
    sweeps = [{"id": "k3x9", "handle": "local://s/sweep:k3x9", "component": "utils.python",
               "points": 6, "created": 1000.0}]  # fmt: skip
    lines = frame.overview_text(doc, sweeps, now=1090.0).splitlines()
    assert lines[0].split() == list(frame.app_columns(doc))
    assert lines[1].startswith("local://trainlaunch/train-abc  local    RUNNING")
    assert lines[2].split() == [
        "local://trainlaunch/echo-x",
        "local",
        "FAILED",
        "2h01m",
        "exit",
        "3",
    ]
    assert lines[3] == "note: slurm: sinfo not found"
    assert lines[5].split() == ["sweep", "component", "points", "age"]
    assert lines[6].split() == ["local://s/sweep:k3x9", "utils.python", "6", "90s"]


def test_overview_text_of_nothing_is_empty() -> None:
    assert frame.overview_text({"apps": [], "notes": []}, [], now=0) == ""


RANK = {
    "rank": 1,
    "running": True,
    "stalled": True,
    "exit_code": None,
    "idle_s": 75.0,
    "step": 5,
    "steps_per_s": 0.0,
    "cpu_percent": 99.5,
    "rss": 512 * frame.MIB,
    "gpu": {"gpu": 0, "util": 87, "mem_mib": 1234},
    "last_line": "rank 1   stuck",
}


def test_a_rank_row_shows_progress_usage_gpu_and_its_last_line() -> None:
    assert plain(frame.rank_cells(RANK)) == [
        "1", "STALLED", "5", "0.0", "75s", "100", "512M", "0 87% 1234MiB", "rank 1   stuck",
    ]  # fmt: skip
    exited = {"rank": 2, "running": False, "exit_code": 137}
    assert plain(frame.rank_cells(exited))[:2] == ["2", "exited (137)"]


def test_app_text_has_the_head_why_hang_ranks_and_merged_tail() -> None:
    view = {
        "handle": "local://trainlaunch/train-abc",
        "live": {**RUNNING, "restarts": 2},
        "status": {
            "state": "RUNNING",
            "exit_code": None,
            "msg": "",
            "failure": {"line": "rank 1 ran out of memory", "evidence": ["dmesg: oom-kill"]},
            "hang": {
                "hangs": 2,
                "idle_s": 130,
                "action": "none",
                "dump": "/x/hang-2.txt",
                "collectives": {"lines": ["ranks 0,2-3 wait in all_reduce #4"]},
                "summary": ["rank 1: <module> at hang.py:33"],
            },
        },
        "ranks": [RANK],
        "logs": [{"label": "[train/0 ranks 0-3]", "line": "epoch 1"}],
        "logs_note": "",
    }
    lines = frame.app_text(view).splitlines()
    assert lines[0] == "local://trainlaunch/train-abc  RUNNING  ranks 3/4  restarts 2  requeues 1"
    assert lines[1] == RUNNING["stall"]
    assert lines[2:4] == ["why: rank 1 ran out of memory", "     dmesg: oom-kill"]
    assert lines[4].startswith("hang #2: no progress for 130s; action: none; stacks: /x/hang-2")
    assert lines[5:7] == ["  ranks 0,2-3 wait in all_reduce #4", "  rank 1: <module> at hang.py:33"]
    assert lines[8].split() == list(frame.RANK_COLUMNS[:-1]) + ["last", "line"]
    assert lines[9].split()[:3] == ["1", "STALLED", "5"]
    assert lines[-1] == "[train/0 ranks 0-3] epoch 1"


def test_app_text_keeps_the_newest_log_lines_and_says_why_there_are_none() -> None:
    view = {"handle": "h", "live": {}, "status": {"state": "SUCCEEDED", "exit_code": 0}}
    logs = [{"label": "[r/0]", "line": f"line {i}"} for i in range(50)]
    assert frame.app_text({**view, "logs": logs}, log_lines=3).splitlines()[-3:] == [
        "[r/0] line 47", "[r/0] line 48", "[r/0] line 49",
    ]  # fmt: skip
    text = frame.app_text({**view, "logs": [], "logs_note": "no logs on this backend"})
    assert text.splitlines() == ["h  SUCCEEDED  exit 0", "", "no logs on this backend"]


def test_sweep_text_shows_each_points_params_state_and_metric() -> None:
    view = {
        "handle": "local://s/sweep:k3x9",
        "component": "utils.python",
        "args": ["train.py", "--lr", "{lr}"],
        "params": ["lr"],
        "metric": "loss",
        "points": [
            {"index": 0, "params": {"lr": "0.1"}, "seed": 1, "state": "SUCCEEDED", "steps": 5,
             "last": {"loss": 1.6040054}, "best": {"loss": 1.5}},
            {"index": 1, "params": {"lr": "0.3"}, "seed": None, "state": "PENDING", "steps": 0,
             "last": {"loss": None}, "best": {"loss": None}},
        ],
    }  # fmt: skip
    lines = frame.sweep_text(view).splitlines()
    assert lines[0] == "local://s/sweep:k3x9  utils.python train.py --lr {lr}"
    assert lines[2].split() == ["#", "lr", "seed", "state", "steps", "loss", "last", "best"]
    assert lines[3].split() == ["0", "0.1", "1", "SUCCEEDED", "5", "1.604", "1.5"]
    assert lines[4].split() == ["1", "0.3", "PENDING", "0"]


def test_numbers_rates_and_durations() -> None:
    assert [frame.number(v) for v in (None, True, 3, 0.000123456, float("nan"), "x")] == [
        "", "True", "3", "0.0001235", "nan", "x",
    ]  # fmt: skip
    assert [frame.rate(v) for v in (None, 0.04, 99.94, 1234.5)] == ["", "0.0", "99.9", "1234"]
    assert [frame.ago(v) for v in (None, -3, 59, 119, 7199, 7300)] == [
        "", "0s", "59s", "119s", "119m", "2h01m",
    ]  # fmt: skip
