"""trainlaunch.metrics.reader: parsing, per-rank views and the ASCII chart (pure functions)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from trainlaunch.errors import UsageError
from trainlaunch.metrics.reader import (
    MetricsData,
    find_metric_files,
    latest_values,
    metric_names,
    metric_series,
    parse_lines,
    read_metrics,
    render_chart,
    sparkline,
)


def line(step: int, **metrics: object) -> str:
    return json.dumps({"step": step, "epoch": 0, "timestamp": "t", **metrics}) + "\n"


def write(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_parse_tolerates_a_truncated_last_line_and_counts_garbage() -> None:
    records, skipped, truncated = parse_lines(
        [line(0, loss=1.0), "not json\n", "[1, 2]\n", "\n", line(1, loss=0.5), '{"step": 2, "lo']
    )
    assert [r["step"] for r in records] == [0, 1]
    assert (skipped, truncated) == (2, 1)


def test_parse_reads_nonfinite_spellings_back_as_floats() -> None:
    (record,), _, _ = parse_lines([line(0, a="NaN", b="Infinity", c=["-Infinity", 1], s="text")])
    assert math.isnan(record["a"]) and record["b"] == math.inf
    assert record["c"] == [-math.inf, 1] and record["s"] == "text"


def test_find_files_in_directory_glob_and_file(tmp_path: Path) -> None:
    for rank in (10, 2, 1):
        write(tmp_path / f"rank{rank}.jsonl", line(0))
    write(tmp_path / "notes.txt", "x")
    names = [Path(p).name for p in find_metric_files(str(tmp_path))]
    assert names == ["rank1.jsonl", "rank2.jsonl", "rank10.jsonl"]
    assert len(find_metric_files(str(tmp_path / "rank1*.jsonl"))) == 2
    assert find_metric_files(str(tmp_path / "rank2.jsonl")) == [str(tmp_path / "rank2.jsonl")]
    with pytest.raises(UsageError, match="no metrics files"):
        find_metric_files(str(tmp_path / "missing"))


def test_read_assigns_ranks_from_field_then_file_name(tmp_path: Path) -> None:
    write(tmp_path / "rank0.jsonl", line(0, loss=3.0), line(1, loss=2.0), "garbage\n")
    write(tmp_path / "rank1.jsonl", line(0, loss=4.0), '{"step": 1, "lo')
    write(tmp_path / "shared.jsonl", line(0, rank=5, loss=1.0), line(0, loss=9.0))
    data = read_metrics(str(tmp_path))
    assert sorted(data.records, key=str) == [0, 1, 5, "shared.jsonl"]
    assert (data.skipped_lines, data.truncated_lines) == (1, 1)
    assert metric_names(data) == ["loss"]


def test_latest_values_per_rank() -> None:
    data = MetricsData(
        records={
            1: [{"step": 0, "loss": 2.0, "acc": 0.1}, {"step": 1, "loss": 1.0}],
            0: [{"step": 0, "loss": 5.0, "timestamp": "t", "rank": 0}],
        }
    )
    assert latest_values(data) == {
        0: {"step": 0, "loss": 5.0},
        1: {"step": 1, "loss": 1.0, "acc": 0.1},
    }
    assert list(latest_values(data)) == [0, 1]


def test_series_sorted_by_step_later_duplicate_wins_non_numbers_dropped() -> None:
    data = MetricsData(
        records={
            0: [
                {"step": 2, "loss": 3.0},
                {"step": 1, "loss": 4.0},
                {"step": 2, "loss": 2.5},  # a restarted run logged step 2 again
                {"step": 3, "loss": "n/a"},
                {"step": 4, "loss": True},
                {"step": 5},
            ],
            1: [{"step": 0, "other": 1.0}],
        }
    )
    assert metric_series(data, "loss") == {0: [(1, 4.0), (2, 2.5)]}


def test_sparkline_scales_and_marks_nonfinite() -> None:
    assert sparkline([]) == ""
    assert sparkline([0.0, 1.0, 2.0]) == " =@"
    assert sparkline([1.0, math.nan, 1.0]) == " ! "
    assert len(sparkline([float(i) for i in range(100)], width=10)) == 10


def test_chart_draws_each_rank_with_axes_and_legend() -> None:
    chart = render_chart(
        {0: [(0, 1.0), (10, 0.0)], 1: [(0, 0.0), (10, 1.0)]}, width=11, height=5, title="loss"
    )
    lines = chart.splitlines()
    assert lines[0] == "loss"
    assert lines[1] == "1 |*         o"
    assert lines[5] == "0 |o         *"
    assert lines[6] == "  +-----------"
    assert lines[7].startswith("   step 0") and lines[7].endswith("10")
    assert lines[8] == "* rank 0  o rank 1"
    assert len(lines) == 9


def test_chart_handles_flat_lines_and_no_data() -> None:
    flat = render_chart({0: [(1, 2.0), (2, 2.0)]}, width=10, height=3)
    assert flat.splitlines()[1].endswith("*        *")
    assert render_chart({0: [(1, math.nan)]}) == "(no finite data)"
    assert render_chart({}, title="x") == "x\n(no finite data)"
