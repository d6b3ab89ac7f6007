"""combined.log: whole lines of both streams in arrival order; which files `logs` reads."""

from __future__ import annotations

import os
from pathlib import Path

from trainlaunch.node.interleave import MAX_PENDING, Combined, Pump, open_log
from trainlaunch.schedulers.logfiles import stream_files


def test_lines_are_whole_and_in_arrival_order(tmp_path: Path) -> None:
    path = tmp_path / "combined.log"
    c = Combined(open_log(str(path)))
    c.feed(1, b"out 0")  # python -u: the text, then its newline, in two writes
    c.feed(2, b"err 0\n")
    c.feed(1, b"\nout 1\nout")
    c.feed(2, b"err 1\n")
    c.end(1)  # a last line without newline still ends the stream whole
    c.close()
    assert path.read_bytes() == b"err 0\nout 0\nout 1\nerr 1\nout\n"


def test_a_line_longer_than_the_limit_goes_out_in_pieces(tmp_path: Path) -> None:
    path = tmp_path / "combined.log"
    c = Combined(open_log(str(path)))
    c.feed(1, b"x" * MAX_PENDING)
    assert path.stat().st_size == MAX_PENDING  # not held forever
    c.close()


def test_pump_copies_exact_bytes_and_combined_lines(tmp_path: Path) -> None:
    combined = Combined(open_log(str(tmp_path / "combined.log")))
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    out = Pump(out_r, open_log(str(tmp_path / "stdout.log")), combined, 1)
    err = Pump(err_r, open_log(str(tmp_path / "stderr.log")), combined, 2)
    for fd, data, pump in ((out_w, b"a\nb", out), (err_w, b"E\n", err), (out_w, b"c\n", out)):
        os.write(fd, data)
        assert pump.read()
    os.close(out_w)
    os.close(err_w)
    assert not out.read() and not err.read()  # end of both streams
    out.close()
    err.close()
    combined.close()
    assert (tmp_path / "stdout.log").read_bytes() == b"a\nbc\n"
    assert (tmp_path / "stderr.log").read_bytes() == b"E\n"
    assert (tmp_path / "combined.log").read_bytes() == b"a\nE\nbc\n"


def test_stream_files(tmp_path: Path) -> None:
    new, old, pending = tmp_path / "new", tmp_path / "old", tmp_path / "pending"
    for d in (new, old, pending):
        d.mkdir()
    for name in ("combined.log", "stdout.log", "stderr.log"):
        (new / name).write_text("")
    for name in ("stdout.log", "stderr.log"):
        (old / name).write_text("")  # written before combined.log existed
    assert stream_files(new, None) == [new / "combined.log"]
    assert stream_files(new, "combined") == [new / "combined.log"]
    assert stream_files(new, "stderr") == [new / "stderr.log"]
    assert stream_files(old, None) == [old / "stdout.log", old / "stderr.log"]
    assert stream_files(pending, None) == [pending / "combined.log"]  # followed once it starts
    assert stream_files(pending, None, combined=False) == [
        pending / "stdout.log",
        pending / "stderr.log",
    ]
