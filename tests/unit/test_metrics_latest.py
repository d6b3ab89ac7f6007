"""metrics/latest.py: a view's repeated readings give what a full backwards read gives, while
reading only what was appended (and nothing for an unchanged file)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from trainlaunch.metrics import latest as latest_mod
from trainlaunch.metrics.latest import LatestFiles
from trainlaunch.metrics.summary import file_latest, read_latest


def _line(rng: random.Random, step: int) -> bytes:
    kind = rng.random()
    if kind < 0.05:
        return b"not json\n"
    if kind < 0.08:
        return b"\n"
    record: dict = {"step": step, "loss": rng.random()}
    if rng.random() < 0.3:
        record["rank"] = rng.choice([0, 1])
    if rng.random() < 0.2:
        record[f"m{rng.randrange(4)}"] = "NaN" if rng.random() < 0.3 else step
    return json.dumps(record).encode() + b"\n"


@pytest.mark.parametrize("seed", range(8))
def test_appends_read_as_a_full_read(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "rank3.jsonl"
    path.write_bytes(b"")
    files = LatestFiles()
    written = b""
    for step in range(60):
        data = b"".join(_line(rng, step) for _ in range(rng.randrange(0, 4)))
        if rng.random() < 0.3:  # a write in progress: part of a line
            cut = rng.randrange(0, len(data) + 1)
            data, rest = data[:cut], data[cut:]
        else:
            rest = b""
        with open(path, "ab") as f:
            f.write(data)
        written += data
        got = files.file_latest(str(path))
        want = file_latest(str(path))
        assert got[0] == want[0], (step, written[-300:])
        assert got[1:] == want[1:]  # unparseable and truncated lines alike
        with open(path, "ab") as f:
            f.write(rest)
        written += rest
    assert files.read(str(tmp_path)).records == read_latest(str(tmp_path)).records


def test_an_unchanged_file_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "rank0.jsonl"
    path.write_text('{"step": 1, "loss": 0.5}\n')
    files = LatestFiles()
    assert files.file_latest(str(path))[0] == {0: {"step": 1, "loss": 0.5}}
    reads = []
    monkeypatch.setattr(latest_mod, "file_latest", lambda *a, **k: reads.append(a))
    assert files.file_latest(str(path))[0] == {0: {"step": 1, "loss": 0.5}}
    with open(path, "a") as f:
        f.write('{"step": 2, "loss": 0.25}\n')
    assert files.file_latest(str(path))[0] == {0: {"step": 2, "loss": 0.25}}
    assert reads == []  # the append was read on from where the last reading stopped


def test_a_replaced_or_shorter_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "rank0.jsonl"
    path.write_text('{"step": 1, "a": 1}\n{"step": 2, "b": 2}\n')
    files = LatestFiles()
    assert files.file_latest(str(path))[0] == {0: {"step": 2, "a": 1, "b": 2}}
    path.write_text('{"step": 1, "c": 3}\n')  # cut short: the same inode
    assert files.file_latest(str(path))[0] == {0: {"step": 1, "c": 3}}
    other = tmp_path / "new"
    other.write_text('{"step": 7, "d": 4}\n{"step": 8, "d": 5}\n')
    os.replace(other, path)
    assert files.file_latest(str(path))[0] == {0: {"step": 8, "d": 5}}
