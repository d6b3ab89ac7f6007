"""The pure comparison of runs: table rows, best/last, overlay chart."""

from __future__ import annotations

import math

import pytest

from trainlaunch.errors import UsageError
from trainlaunch.metrics import compare
from trainlaunch.metrics import reader as mr


def _data(losses: list[float], rank: int = 0, t0: float = 100.0) -> mr.MetricsData:
    rows = [
        {"step": i, "timestamp": t0 + i, "rank": rank, "loss": v, "acc": 1 - v}
        for i, v in enumerate(losses)
    ]
    return mr.MetricsData(records={rank: rows})


def test_rows_last_best_steps_and_params() -> None:
    apps = [
        compare.AppMetrics("local://s/a", {"lr": "0.1", "seed": 1}, _data([1.0, 0.2, 0.4])),
        compare.AppMetrics("local://s/b", {"lr": "0.01", "seed": 1}, _data([1.0, 0.9])),
    ]
    rows = compare.compare_rows(apps)
    assert rows[0]["last"] == {"acc": pytest.approx(0.6), "loss": 0.4}
    assert rows[0]["best"] == {"acc": pytest.approx(0.8), "loss": 0.2}  # max acc, min loss
    assert [r["steps"] for r in rows] == [3, 2]
    text = compare.render_table(compare.compare_rows(apps, "loss"))
    assert text.splitlines() == [
        "handle\tlr\tseed\tsteps\tloss.last\tloss.best",
        "local://s/a\t0.1\t1\t3\t0.4\t0.2",
        "local://s/b\t0.01\t1\t2\t0.9\t0.9",
    ]
    with pytest.raises(UsageError, match="no metric 'los'"):
        compare.compare_rows(apps, "los")


def test_rank0_stands_for_the_app_and_nan_is_never_best() -> None:
    data = _data([0.5, math.nan, 0.7])
    data.records[1] = [{"step": 0, "loss": 0.0}]
    row = compare.summarize(compare.AppMetrics("h", {}, data), ["loss"])
    assert row["best"]["loss"] == 0.5 and row["last"]["loss"] == 0.7


def test_overlay_chart_legend_and_time_axis() -> None:
    apps = [
        compare.AppMetrics("local://s/a", {"lr": "0.1"}, _data([1.0, 0.5], t0=50.0)),
        compare.AppMetrics("local://s/b", {}, _data([0.8, 0.7])),
    ]
    assert compare.overlay_series(apps, "loss", "time")[0] == [(0.0, 1.0), (1.0, 0.5)]
    chart = compare.render_overlay(apps, "loss")
    assert chart.splitlines()[-1] == "* lr=0.1  o local://s/b"
    assert "o" in chart and "*" in chart
    assert "sec 0" in compare.render_overlay(apps, "loss", "time")
    with pytest.raises(UsageError):
        compare.overlay_series(apps, "loss", "wall")


def test_chart_styles_colour_by_parameter_values_and_style_by_seed() -> None:
    # issue 22 #21: the points of one parameter value got unrelated colours
    def app(handle: str, **params: object) -> compare.AppMetrics:
        return compare.AppMetrics(handle, params, _data([1.0]))

    apps = [
        app("a", lr="0.1", seed=1),
        app("b", lr="0.1", seed=2),
        app("c", lr="0.01", seed=1),
        app("d", lr="0.01", seed=2),
    ]
    assert compare.chart_styles(apps) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    plain = [app("x", seed=7), app("y", seed=8)]  # no parameters: each app its own colour
    assert compare.chart_styles(plain) == [(0, 0), (1, 1)]


def test_a_log_scale_when_values_span_more_than_three_decades() -> None:
    assert compare.spans_decades([3.5, 0.1, 4e-8])
    assert not compare.spans_decades([3.5, 0.01])  # 350x: linear reads fine
    assert not compare.spans_decades([3.5, 0.0, 4e-8])  # a zero has no place on a log axis
    assert not compare.spans_decades([-1.0, 1e-9])
    assert not compare.spans_decades([math.nan, math.inf])
