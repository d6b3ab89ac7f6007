"""MetricLogger in one process: format, policies, buffering, threads, tensors."""

from __future__ import annotations

import gc
import json
import math
import re
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from trainlaunch.rank.metrics import (
    MetricLogger,
    MetricLoggerDist,
    MetricsSample,
    NullMetricLogger,
    build_metric_logger,
    stack_and_move_tensor_metrics_to_cpu,
)


def strict_lines(path: Path) -> list[dict[str, Any]]:
    """Every line as strict JSON (NaN/Infinity tokens are an error), newline-terminated."""

    def reject(token: str) -> None:
        raise AssertionError(f"invalid JSON token {token}")

    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n")
    return [json.loads(line, parse_constant=reject) for line in text.splitlines()]


def log_all(path: Path, *metrics: dict[str, Any], **kwargs: Any) -> list[dict[str, Any]]:
    with MetricLogger(path, **kwargs) as logger:
        for step, values in enumerate(metrics):
            logger.log(MetricsSample(step, 0, values))
    return strict_lines(path)


# --- MetricsSample -------------------------------------------------------------------------------
def test_sample_keeps_a_caller_timestamp_and_stamps_otherwise() -> None:
    assert MetricsSample(1, 0, {}, timestamp="2020-01-01T00:00:00.000Z").timestamp == (
        "2020-01-01T00:00:00.000Z"
    )
    stamp = MetricsSample(1, 0).timestamp
    assert stamp is not None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)


def test_sample_to_dict_refuses_to_overwrite_header() -> None:
    assert MetricsSample(3, 1, {"loss": 1.0}, "t").to_dict() == {
        "step": 3, "epoch": 1, "timestamp": "t", "loss": 1.0,
    }  # fmt: skip
    with pytest.raises(ValueError, match="'step'"):
        MetricsSample(3, 1, {"step": 9}).to_dict()


# --- format and policies -------------------------------------------------------------------------
def test_lines_are_json_objects_with_header_first(tmp_path: Path) -> None:
    rows = log_all(tmp_path / "sub" / "m.jsonl", {"loss": 0.5, "tokens": 7}, {"loss": 0.25})
    assert rows[0] == {"step": 0, "epoch": 0, "timestamp": rows[0]["timestamp"], "loss": 0.5,
                       "tokens": 7}  # fmt: skip
    assert list(rows[0])[:3] == ["step", "epoch", "timestamp"]
    assert rows[1]["loss"] == 0.25


def test_nonfinite_floats_are_strings_everywhere(tmp_path: Path) -> None:
    rows = log_all(
        tmp_path / "m.jsonl",
        {"a": math.nan, "b": math.inf, "c": -math.inf, "d": 1.5},
        {"l": [1.0, math.nan], "n": np.float32("nan"), "t": torch.tensor(float("inf"))},
        {"arr": np.array([-np.inf, 2.0]), "deep": {"x": [math.nan]}},
    )
    assert rows[0] | {"timestamp": 0} == {"step": 0, "epoch": 0, "timestamp": 0, "a": "NaN",
                                          "b": "Infinity", "c": "-Infinity", "d": 1.5}  # fmt: skip
    assert (rows[1]["l"], rows[1]["n"], rows[1]["t"]) == ([1.0, "NaN"], "NaN", "Infinity")
    assert (rows[2]["arr"], rows[2]["deep"]) == (["-Infinity", 2.0], {"x": ["NaN"]})


def test_numpy_tensor_and_plain_values(tmp_path: Path) -> None:
    metrics = {
        "f32": np.float32(0.5), "f64": np.float64(0.1), "i64": np.int64(3), "b": np.bool_(True),
        "arr": np.arange(3), "t0": torch.tensor(2.5), "ti": torch.tensor(4),
        "tv": torch.tensor([[1, 2], [3, 4]]), "grad": torch.tensor(1.0, requires_grad=True) * 2,
        "bf16": torch.tensor(0.5, dtype=torch.bfloat16), "none": None, "flag": False,
        "text": "héllo \"q\" \n", "big": 10**30, "huge": 10**400, "nested": {"a": [1, 2.5]},
    }  # fmt: skip
    (row,) = log_all(tmp_path / "m.jsonl", metrics)
    assert row["f32"] == 0.5 and row["f64"] == 0.1 and row["i64"] == 3 and row["b"] is True
    assert row["arr"] == [0, 1, 2] and row["t0"] == 2.5 and row["ti"] == 4
    assert row["tv"] == [[1, 2], [3, 4]] and row["grad"] == 2.0 and row["bf16"] == 0.5
    assert row["none"] is None and row["flag"] is False and row["text"] == 'héllo "q" \n'
    assert row["big"] == 10**30 and row["huge"] == 10**400 and row["nested"] == {"a": [1, 2.5]}


def test_odd_metric_names_and_strings(tmp_path: Path) -> None:
    rows = log_all(tmp_path / "m.jsonl", {"100%": 1.0, 'q"uote': 2, "ünï": 3.0, "s": "x\ud800y"})
    assert rows[0]["100%"] == 1.0 and rows[0]['q"uote'] == 2 and rows[0]["ünï"] == 3.0
    assert rows[0]["s"] == "x\ud800y"  # a lone surrogate survives as a JSON escape


def test_one_buffer_mixing_every_kind_of_record(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    with MetricLogger(path, buffer_size=1000) as logger:
        logger.log(MetricsSample(0, 0, {"a": 1.0, "b": 2}))
        logger.log(MetricsSample(1, 0, {"a": np.float32(0.5), "b": 3}))  # a rendered line
        logger.log(MetricsSample(2, 0, {"a": math.nan, "b": 4}))  # fast, but not finite
        logger.log(MetricsSample(3, 0, {"b": 5}))  # another schema
        logger.log(MetricsSample(4, 0, {"a": 1.5, "b": 6}, timestamp='odd "stamp" ü'))
        logger.log(MetricsSample(5, 0, {"a": 2.5, "b": 7}))
    rows = strict_lines(path)
    assert [row["step"] for row in rows] == [0, 1, 2, 3, 4, 5]
    assert [row.get("a") for row in rows] == [1.0, 0.5, "NaN", None, 1.5, 2.5]
    assert [row["b"] for row in rows] == [2, 3, 4, 5, 6, 7]
    assert rows[4]["timestamp"] == 'odd "stamp" ü'


def test_a_value_only_the_drain_can_reject_costs_one_record(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    logger = MetricLogger(path, buffer_size=1000)
    logger.log(MetricsSample(0, 0, {"n": 1}))
    logger.log(MetricsSample(1, 0, {"n": 10**5000}))  # too many digits for int -> str
    logger.log(MetricsSample(2, 0, {"n": 3}))
    with pytest.raises(ValueError, match="metric 'n': integer too large"):
        logger.close()
    assert [row["n"] for row in strict_lines(path)] == [1, 3]


@pytest.mark.parametrize("name", ["step", "epoch", "timestamp"])
def test_header_name_collision_raises_and_logger_survives(tmp_path: Path, name: str) -> None:
    path = tmp_path / "m.jsonl"
    with MetricLogger(path) as logger:
        with pytest.raises(ValueError, match=f"'{name}' collides"):
            logger.log(MetricsSample(0, 0, {name: 1.0, "loss": 2.0}))
        logger.log(MetricsSample(1, 0, {"loss": 2.0}))
    assert [row["step"] for row in strict_lines(path)] == [1]


def test_rank_field_is_written_and_reserved(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    with MetricLogger(path, rank_field=3) as logger:
        with pytest.raises(ValueError, match="'rank' collides"):
            logger.log(MetricsSample(0, 0, {"rank": 1}))
        logger.log(MetricsSample(1, 0, {"loss": 2.0}))
        logger.log(MetricsSample(2, 0, {"loss": math.nan}))
    assert [row["rank"] for row in strict_lines(path)] == [3, 3]


@pytest.mark.parametrize(
    "bad",
    [object(), 1 + 2j, np.complex64(1), torch.tensor([1j]), np.datetime64("2020-01-01"), b"x"],
)
def test_bad_value_raises_once_naming_metric_and_does_not_poison(tmp_path: Path, bad: Any) -> None:
    path = tmp_path / "m.jsonl"
    logger = MetricLogger(path, buffer_size=2)
    logger.log(MetricsSample(0, 0, {"loss": 1.0}))
    with pytest.raises(TypeError, match="metric 'weird'"):
        logger.log(MetricsSample(1, 0, {"loss": 1.0, "weird": bad}))
    for step in (2, 3, 4):
        logger.log(MetricsSample(step, 0, {"loss": 1.0}))
    logger.close()
    assert [row["step"] for row in strict_lines(path)] == [0, 2, 3, 4]


def test_non_string_metric_name_is_rejected(tmp_path: Path) -> None:
    with MetricLogger(tmp_path / "m.jsonl") as logger:
        with pytest.raises(TypeError, match="metric names must be str"):
            logger.log(MetricsSample(0, 0, {1: 1.0}))  # type: ignore[dict-item]
        with pytest.raises(TypeError, match="MetricsSample"):
            logger.log({"step": 1})  # type: ignore[arg-type]


def test_caller_sample_is_not_mutated_and_later_changes_are_not_seen(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    tensor, values = torch.tensor(1.0), [1, 2]
    sample = MetricsSample(0, 0, {"t": tensor, "l": values, "f": 0.5})
    with MetricLogger(path) as logger:
        logger.log(sample)
        tensor.add_(41)  # accumulators are often updated in place right after logging
        values.append(3)
        sample.metrics["f"] = 9.0
    assert sample.metrics["t"] is tensor and sample.metrics["l"] is values
    (row,) = strict_lines(path)
    assert (row["t"], row["l"], row["f"]) == (1.0, [1, 2], 0.5)


# --- buffering, flush, close ---------------------------------------------------------------------
def test_buffer_reaches_file_when_full_and_flush_makes_rest_visible(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    logger = MetricLogger(path, buffer_size=3)
    for step in range(4):
        logger.log(MetricsSample(step, 0, {"x": float(step)}))
    assert [row["step"] for row in strict_lines(path)] == [0, 1, 2]
    logger.flush()
    assert [row["step"] for row in strict_lines(path)] == [0, 1, 2, 3]
    logger.close()
    logger.close()  # twice is harmless
    logger.flush()  # and flushing a closed logger too
    assert logger.closed
    with pytest.raises(ValueError, match="closed MetricLogger"):
        logger.log(MetricsSample(9, 0, {"x": 1.0}))


def test_flush_flag_does_not_shadow_flush_method(tmp_path: Path) -> None:
    logger = MetricLogger(tmp_path / "m.jsonl", flush=True, buffer_size=2)
    assert logger.fsync_on_write is True and callable(logger.flush)
    for step in range(3):
        logger.log(MetricsSample(step, 0, {"x": 1.0}))
    logger.flush()
    assert len(strict_lines(tmp_path / "m.jsonl")) == 3
    logger.close()


def test_append_and_truncate(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    log_all(path, {"x": 1.0})
    assert len(log_all(path, {"x": 2.0})) == 2
    assert len(log_all(path, {"x": 3.0}, append=False)) == 1


@pytest.mark.parametrize("size", [0, -1, True, 1.5, "10"])
def test_bad_buffer_size_raises_before_creating_the_file(tmp_path: Path, size: Any) -> None:
    with pytest.raises(ValueError, match="buffer_size"):
        MetricLogger(tmp_path / "m.jsonl", buffer_size=size)
    assert not (tmp_path / "m.jsonl").exists()


def test_garbage_collected_logger_writes_its_buffer(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    logger = MetricLogger(path)
    for step in range(3):
        logger.log(MetricsSample(step, 0, {"x": 1.0}))
    del logger
    gc.collect()
    assert [row["step"] for row in strict_lines(path)] == [0, 1, 2]


def test_threads_write_every_record_exactly_once(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    logger = MetricLogger(path, buffer_size=7)  # fills thousands of times
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        start = threading.Barrier(8)

        def worker(thread: int) -> None:
            start.wait()
            for i in range(5000):
                logger.log(MetricsSample(i, thread, {"id": thread * 5000 + i}))

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    logger.close()
    ids = [row["id"] for row in strict_lines(path)]
    assert len(ids) == 40_000
    assert len(set(ids)) == 40_000


def _log_while_closing(path: Path) -> None:
    logger = MetricLogger(path, buffer_size=5)
    accepted: list[list[int]] = [[] for _ in range(4)]
    start = threading.Barrier(5)

    def worker(thread: int) -> None:
        start.wait()
        for i in range(3000):
            try:
                logger.log(MetricsSample(i, thread, {"id": thread * 3000 + i}))
            except ValueError:
                return  # closed: every later call would raise too
            accepted[thread].append(thread * 3000 + i)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    start.wait()
    logger.close()
    for thread in threads:
        thread.join()
    ids = sorted(row["id"] for row in strict_lines(path))
    assert ids == sorted(i for done in accepted for i in done)


def test_close_racing_log_loses_no_accepted_record(tmp_path: Path) -> None:
    # log() buffers without the lock: a close() in another thread must leave every record
    # either written (log returned) or refused (log raised ValueError), never silently dropped
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for attempt in range(20):
            _log_while_closing(tmp_path / f"m{attempt}.jsonl")
    finally:
        sys.setswitchinterval(interval)


# --- tensors -------------------------------------------------------------------------------------
def test_stack_and_move_converts_copies_and_keeps_dtypes() -> None:
    leaf = torch.tensor(2.0, requires_grad=True)
    samples = [
        MetricsSample(0, 0, {"a": torch.tensor(1.0), "b": torch.ones(2), "n": 5}, "t0"),
        MetricsSample(1, 0, {"a": leaf * 1, "b": torch.arange(3), "c": torch.tensor(7)}, "t1"),
        MetricsSample(2, 0, {"b": torch.zeros(2, 2)}, "t2"),
    ]
    out = stack_and_move_tensor_metrics_to_cpu(samples)
    assert [s.metrics for s in out] == [
        {"a": 1.0, "b": [1.0, 1.0], "n": 5},
        {"a": 2.0, "b": [0, 1, 2], "c": 7},
        {"b": [[0.0, 0.0], [0.0, 0.0]]},
    ]
    assert type(out[1].metrics["c"]) is int  # not promoted to float by stacking with floats
    assert [s.timestamp for s in out] == ["t0", "t1", "t2"]
    assert isinstance(samples[0].metrics["a"], torch.Tensor), "inputs must not be modified"


def test_build_metric_logger_without_a_process_group(tmp_path: Path) -> None:
    with build_metric_logger(tmp_path / "m.jsonl") as logger:
        assert type(logger) is MetricLogger


def test_dist_logger_needs_a_process_group_and_touches_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="initialized torch.distributed"):
        MetricLoggerDist(tmp_path / "m.jsonl")
    assert list(tmp_path.iterdir()) == []


def test_null_logger_has_the_logger_interface() -> None:
    with NullMetricLogger() as logger:
        logger.log(MetricsSample(0, 0, {"x": 1.0}))
        logger.flush()
    assert logger.enabled is False and logger.filepath is None and logger.closed
    with pytest.raises(ValueError, match="closed"):
        logger.log(MetricsSample(1, 0, {"x": 1.0}))
    public = {n for n in dir(MetricLogger) if not n.startswith("_")}
    assert public <= set(dir(logger))


# --- accelerator (run where a GPU is lent; skipped elsewhere) ------------------------------------
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
def test_device_values_are_snapshots_converted_with_one_sync_per_dtype(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    accumulator = torch.zeros((), device="cuda")
    vectors = [torch.arange(3, device="cuda") + step for step in range(200)]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")  # warns at every synchronizing operation
    try:
        with pytest.warns() as caught, MetricLogger(path, buffer_size=100) as logger:
            for step in range(200):
                accumulator.add_(step)  # an in-place accumulator, logged and then reset
                nan = accumulator / 0 - accumulator / 0
                logger.log(MetricsSample(step, 0, {"acc": accumulator, "vec": vectors[step],
                                                   "nan": nan}))  # fmt: skip
                accumulator.zero_()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    expected = [float(step) for step in range(200)]
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    assert len(syncs) <= 2 * 2, "one host copy per (device, dtype) per drain: 2 drains x 2 dtypes"
    rows = strict_lines(path)
    assert [row["acc"] for row in rows] == expected
    assert [row["vec"] for row in rows] == [[s, s + 1, s + 2] for s in range(200)]
    assert {row["nan"] for row in rows} == {"NaN"}
