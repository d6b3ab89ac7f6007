"""Log reading helpers: prefixing in chunks, byte spans from the timeline."""

from __future__ import annotations

import io
import json
import os
import threading
from pathlib import Path

import pytest

from trainlaunch.cli.logs import copy_with_prefix
from trainlaunch.schedulers.logfiles import read_lines, time_span


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
@pytest.mark.parametrize("text", ["a\nbb\n\nccc\n", "no newline at end", "x\ny", ""])
def test_copy_with_prefix_is_chunk_size_independent(tmp_path: Path, chunk: int, text: str) -> None:
    path = tmp_path / "log"
    path.write_text(text)
    out = io.BytesIO()
    copy_with_prefix(path, b"r/0 ", out, chunk_size=chunk)
    expected = "".join(f"r/0 {line}\n" for line in text.splitlines())
    assert out.getvalue().decode() == expected


def test_time_span_and_read_lines(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    log.write_text("one\ntwo\nthree\n")
    tl = tmp_path / "timeline.jsonl"
    tl.write_text(
        "".join(
            json.dumps({"t": t, "stdout": s, "stderr": 0}) + "\n"
            for t, s in [(10.0, 0), (11.0, 4), (12.0, 8), (13.0, 14)]
        )
        + '{"t": 14, "std'
    )  # a torn last line is ignored
    assert time_span(tl, "stdout", None, None) == (0, None)
    assert time_span(tl, "stdout", 11.5, None) == (4, None)
    assert list(read_lines([log], None, [time_span(tl, "stdout", 11.5, None)])) == ["two", "three"]
    assert list(read_lines([log], None, [time_span(tl, "stdout", None, 11.0)])) == ["one"]
    assert list(read_lines([log], "^t", [(0, None)])) == ["two", "three"]
    assert time_span(tmp_path / "missing", "stdout", 1.0, 2.0) == (0, None)


@pytest.mark.parametrize("mode", ["wb", "ab"])  # "ab": sendfile refuses O_APPEND, the loop copies
@pytest.mark.parametrize("text", ["a\nbb\n\nccc\n", "no newline at end", "x\ny", ""])
def test_copy_without_prefix_to_a_file_is_exact(tmp_path: Path, mode: str, text: str) -> None:
    path, dest = tmp_path / "log", tmp_path / "out"
    path.write_text(text)
    dest.write_bytes(b"before\n")
    with open(dest, mode) as out:
        out.seek(0, io.SEEK_END)
        copy_with_prefix(path, b"", out)
    expected = "".join(f"{line}\n" for line in text.splitlines())
    assert dest.read_text() == ("before\n" if mode == "ab" else "") + expected


def test_copy_without_prefix_into_a_pipe(tmp_path: Path) -> None:
    path = tmp_path / "log"
    text = "".join(f"line {i}\n" for i in range(50_000)) + "last"  # more than a pipe holds
    path.write_text(text)
    r, w = os.pipe()
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.extend(iter(lambda: os.read(r, 1 << 16), b"")))
    reader.start()
    with open(w, "wb") as out:
        copy_with_prefix(path, b"", out)
    reader.join(timeout=30)
    os.close(r)
    assert b"".join(got).decode() == text + "\n"
