"""MetricLogger writes back exactly the numbers it was given, whichever formatter ran.

A buffer of plain ints and floats is formatted by orjson (the fast path); a run that orjson
cannot take (an int beyond 64 bits, a comma or escape in a timestamp) or that holds a
non-finite value goes through the stdlib path. Whatever the path, every line is strict JSON
and every value reads back equal, sign of zero included.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from trainlaunch.rank.metrics import MetricLogger, MetricsSample

NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.integers(min_value=2**64, max_value=2**200),  # beyond orjson: the stdlib path
)
STAMPS = st.one_of(
    st.just("2026-12-01T10:00:00.000Z"),
    st.text(max_size=12),  # commas, quotes, control characters, non-ASCII
)


def read_back(path: Path) -> list[dict[str, Any]]:
    def reject(token: str) -> None:
        raise AssertionError(f"invalid JSON token {token}")

    text = path.read_text(encoding="utf-8")
    # JSON Lines ends lines with "\n" only; str.splitlines() would also cut at U+0085 (NEL)
    return [json.loads(line, parse_constant=reject) for line in text.split("\n")[:-1]]


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return type(a) is type(b) and a == b


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(rows=[[0.1, 2, 3.5]] * 20, stamp="1,2", rank=None)  # a comma in a timestamp
@example(rows=[[1e-05, -0.0, 2**70]] * 20, stamp="t", rank=3)  # an int beyond orjson
@example(rows=[[1e16, 5e-324, 2**64 - 1]] * 20, stamp='q"', rank=0)
@example(rows=[[0.0, 0.0, 0.0]], stamp="\x85\u2028n", rank=None)  # not line ends in JSON Lines
@given(
    rows=st.lists(st.lists(NUMBERS, min_size=3, max_size=3), min_size=1, max_size=40),
    stamp=STAMPS,
    rank=st.sampled_from([None, 0, 7]),
)
def test_values_read_back_exactly(
    tmp_path_factory: pytest.TempPathFactory, rows: list[list[Any]], stamp: str, rank: int | None
) -> None:
    path = tmp_path_factory.mktemp("m") / "metrics.jsonl"
    with MetricLogger(path, buffer_size=16, rank_field=rank) as logger:
        for step, row in enumerate(rows):
            logger.log(MetricsSample(step, 0, {"a": row[0], "b,c": row[1], 'q"%s': row[2]}, stamp))
    lines = read_back(path)
    assert len(lines) == len(rows)
    for step, (line, row) in enumerate(zip(lines, rows, strict=True)):
        header = {"step": step, "epoch": 0, "timestamp": stamp}
        if rank is not None:
            header["rank"] = rank
        assert list(line) == [*header, "a", "b,c", 'q"%s']
        assert all(line[k] == v for k, v in header.items())
        assert all(same(line[k], v) for k, v in zip(("a", "b,c", 'q"%s'), row, strict=True))


def test_non_finite_values_in_a_fast_buffer_stay_strict(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    with MetricLogger(path, buffer_size=8) as logger:
        for step in range(8):
            value = [1.5, math.nan, math.inf, -math.inf][step % 4]
            logger.log(MetricsSample(step, 0, {"loss": value}))
    got = [line["loss"] for line in read_back(path)]
    assert got == [1.5, "NaN", "Infinity", "-Infinity"] * 2


def test_orjson_is_installed_with_trainlaunch() -> None:
    # the default install carries the fast formatter (pyproject: dependencies)
    assert importlib.util.find_spec("orjson") is not None


def test_the_names_sidecar_lists_every_name_before_its_records(tmp_path: Path) -> None:
    from trainlaunch.metrics.summary import metric_names_of

    path = tmp_path / "rank3.jsonl"
    with MetricLogger(path, rank_field=3) as logger:
        logger.log(MetricsSample(0, 0, {"loss": 1.0}))
        assert metric_names_of(str(path)) == {3: {"loss"}}  # before the buffer drains
        logger.log(MetricsSample(1, 0, {"loss": 1.0, 'va"l\n': 2}))
    assert metric_names_of(str(path)) == {3: {"loss", 'va"l\n'}}
    with MetricLogger(path, append=False) as logger:  # a truncated file starts a new list
        logger.log(MetricsSample(0, 0, {"acc": 0.5}))
    assert metric_names_of(str(path)) == {3: {"acc"}}  # no rank field: the file name's rank


def test_too_many_names_turn_the_sidecar_off(tmp_path: Path) -> None:
    from trainlaunch.metrics.summary import metric_names_of

    path = tmp_path / "rank0.jsonl"
    with MetricLogger(path, buffer_size=1000) as logger:
        for step in range(4200):  # a new name every record: past the template limit
            logger.log(MetricsSample(step, 0, {f"m{step}": 1.0}))
    assert metric_names_of(str(path)) is None
