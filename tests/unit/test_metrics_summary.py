"""The summary read from the files' ends equals a full read, whatever the files hold."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainlaunch import settings as tl_settings
from trainlaunch.errors import UsageError
from trainlaunch.metrics import reader as mr
from trainlaunch.metrics.summary import file_latest, lines_backwards, read_latest

NAMES = ["loss", "lr", "val_loss", "tok/s"]
VALUES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-5, 5),
    st.sampled_from(["NaN", "Infinity", "x"]),
)
RECORD = st.fixed_dictionaries(
    {"step": st.integers(0, 50), "epoch": st.integers(0, 2)},
    optional={name: VALUES for name in NAMES} | {"rank": st.sampled_from([0, 1])},
)
LINE = st.one_of(
    RECORD.map(lambda r: json.dumps(r) + "\n"), st.sampled_from(["{bad\n", "[]\n", "\n"])
)


def summary(target: str) -> tuple[Any, Any]:
    data = read_latest(target)
    return mr.latest_values(data), mr.metric_names(data)


def full(target: str) -> tuple[Any, Any]:
    data = mr.read_metrics(target)
    return mr.latest_values(data), mr.metric_names(data)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.lists(st.lists(LINE, max_size=25), min_size=1, max_size=3),
    cut=st.booleans(),
    block=st.integers(1, 64),
    sidecar=st.booleans(),
)
def test_summary_equals_full_read(
    tmp_path_factory: pytest.TempPathFactory,
    files: list[list[str]],
    cut: bool,
    block: int,
    sidecar: bool,
) -> None:
    root = tmp_path_factory.mktemp("m")
    for n, lines in enumerate(files):
        text = "".join(lines)
        if cut and text:
            text = text[:-3]  # a last line cut short by a crash
        path = root / f"rank{n}.jsonl"
        path.write_text(text)
        if sidecar:  # as MetricLogger writes it: per rank field, every name it used
            used: dict[Any, set[str]] = {}
            for line in lines:
                record = _obj(line) or {}
                rank = record.get("rank") if "rank" in record else None
                used.setdefault(rank, set()).update(k for k in record if k in NAMES)
            names = "".join(
                json.dumps({"rank": rank})
                + "\n"
                + "".join(json.dumps(n) + "\n" for n in sorted(ns))
                for rank, ns in used.items()
            )
            Path(str(path) + tl_settings.METRIC_NAMES_SUFFIX).write_text(names)
    if not any("".join(lines).strip() for lines in files):
        return
    assert summary(str(root)) == full(str(root))
    for n in range(len(files)):  # every block size reads the same lines back
        path = str(root / f"rank{n}.jsonl")
        raw = Path(path).read_bytes()
        assert b"".join(reversed(list(lines_backwards(path, block)))) == raw


def _obj(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def test_stops_at_the_end_when_every_name_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "rank0.jsonl"
    lines = ["garbage\n"] * 1000 + [json.dumps({"step": 1, "epoch": 0, "loss": 2.0, "lr": 0.1})]
    path.write_text("".join(line if line.endswith("\n") else line + "\n" for line in lines))
    Path(str(path) + tl_settings.METRIC_NAMES_SUFFIX).write_text('"loss"\n"lr"\n')
    latest, skipped, truncated = file_latest(str(path))
    assert latest == {0: {"step": 1, "epoch": 0, "loss": 2.0, "lr": 0.1}}
    assert (skipped, truncated) == (0, 0)  # the garbage at the start was never read
    assert mr.read_metrics(str(path)).skipped_lines == 1000


def test_a_name_logged_once_at_the_start_is_found(tmp_path: Path) -> None:
    path = tmp_path / "rank0.jsonl"
    first = {"step": 0, "epoch": 0, "setup_s": 3.5, "loss": 9.0}
    rest = [{"step": s, "epoch": 0, "loss": 1.0 / s} for s in range(1, 3000)]
    path.write_text("".join(json.dumps(r) + "\n" for r in [first, *rest]))
    Path(str(path) + tl_settings.METRIC_NAMES_SUFFIX).write_text('"setup_s"\n"loss"\n')
    latest, _, _ = file_latest(str(path), block=4096)
    assert latest[0]["setup_s"] == 3.5 and latest[0]["step"] == 2999


def test_a_sidecar_that_gave_up_means_a_full_read(tmp_path: Path) -> None:
    path = tmp_path / "rank0.jsonl"
    path.write_text('{"step":0,"epoch":0,"a":1}\n{"step":1,"epoch":0,"b":2}\n')
    Path(str(path) + tl_settings.METRIC_NAMES_SUFFIX).write_text('"b"\nnull\n')
    assert file_latest(str(path))[0] == {0: {"step": 1, "epoch": 0, "a": 1, "b": 2}}


def test_an_overlong_line_is_one_unparseable_line(tmp_path: Path) -> None:
    path = tmp_path / "rank0.jsonl"
    good = '{"step":0,"epoch":0,"a":1}\n'
    path.write_text(good + "[" * 5000 + "\n" + good.replace("0,", "1,", 1))
    latest, skipped, truncated = file_latest(str(path), block=64, max_line=1000)
    assert latest == {0: {"step": 1, "epoch": 0, "a": 1}}
    assert (skipped, truncated) == (1, 0)
    lines = list(lines_backwards(str(path), block=64, max_line=1000))
    assert lines[0] == good.replace("0,", "1,", 1).encode() and lines[2] == good.encode()
    assert len(lines) == 3 and b"too long" in lines[1]


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "rank0.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        read_latest(str(fifo.parent))  # the directory's *.jsonl names the FIFO
