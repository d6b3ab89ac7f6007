"""Per-rank log streams: exact file bytes, whole console lines, torchrun's console rules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainlaunch.agent import logs


def stream(tmp_path: Path, mode: str, **kw: object) -> tuple[logs.Stream, int, int, Path]:
    """A Stream fed through a real pipe, writing its console into another pipe."""
    r, w = os.pipe()
    cr, cw = os.pipe()
    path = tmp_path / "stdout.log"
    s = logs.Stream(r, str(path), cw, mode, b"[default1]:", **kw)  # type: ignore[arg-type]
    return s, w, cr, path


def console(fd: int) -> bytes:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""


@pytest.mark.parametrize(
    "mode, first, second",
    [("prefix", b"[default1]:a\n", b"[default1]:b\n"), ("raw", b"a\n", b"b\n"), ("none", b"", b"")],
)
def test_files_get_bytes_and_console_gets_whole_lines(
    tmp_path: Path, mode: str, first: bytes, second: bytes
) -> None:
    s, w, cr, path = stream(tmp_path, mode)
    os.write(w, b"a\nb")
    assert s.read() is True
    assert console(cr) == first  # the unterminated "b" waits for its newline
    assert path.read_bytes() == b"a\nb"  # the file has every byte as it arrives
    os.write(w, b"\n")
    os.close(w)
    assert s.read() is False  # end of stream
    s.close()
    assert console(cr) == second
    assert path.read_bytes() == b"a\nb\n"


def test_last_unterminated_line_is_completed_on_the_console_only(tmp_path: Path) -> None:
    s, w, cr, path = stream(tmp_path, "prefix")
    os.write(w, b"no newline")
    os.close(w)
    s.read()
    s.close()
    assert console(cr) == b"[default1]:no newline\n"
    assert path.read_bytes() == b"no newline"


def test_tail_keeps_the_last_lines(tmp_path: Path) -> None:
    s, w, _, _ = stream(tmp_path, "none", keep_tail=True)
    os.write(w, b"".join(b"line %d\n" % i for i in range(50)) + b"partial")
    s.read()
    text = s.tail_text()
    assert text.splitlines()[0] == f"line {50 - logs.TAIL_LINES}"
    assert text.endswith("line 49\npartial")


def test_duplicate_filters_copy_teed_matching_lines(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "filtered.log", os.O_WRONLY | os.O_CREAT)
    s, w, _, _ = stream(tmp_path, "prefix", filtered=fd, needles=["loss", "acc"])
    os.write(w, b"loss 1\nskip\nacc 2\n")
    s.read()
    os.close(fd)
    assert (tmp_path / "filtered.log").read_bytes() == b"[default1]:loss 1\n[default1]:acc 2\n"


def test_console_gone_keeps_files(tmp_path: Path) -> None:
    s, w, cr, path = stream(tmp_path, "raw")
    os.close(cr)
    os.write(w, b"x\ny\n")
    s.read()
    assert s.console == -1 and path.read_bytes() == b"x\ny\n"


@pytest.mark.parametrize(
    "tee, redirects, ranks, local_rank, out, err",
    [
        (0, 0, None, 0, "raw", "raw"),  # torchrun default: straight to the console
        (3, 0, None, 1, "prefix", "prefix"),
        (0, 3, None, 0, "none", "none"),  # redirected only: console silent
        (1, 2, None, 0, "prefix", "none"),
        ({1: 3}, 0, None, 0, "raw", "raw"),
        ({1: 3}, 0, None, 1, "prefix", "prefix"),
        (3, 0, frozenset({0}), 1, "none", "none"),  # --local-ranks-filter hides other ranks
        (0, 0, frozenset({0}), 0, "raw", "raw"),
    ],
)
def test_console_modes(
    tee: object,
    redirects: object,
    ranks: frozenset[int] | None,
    local_rank: int,
    out: str,
    err: str,
) -> None:
    modes = logs.console_modes(tee, redirects, ranks, local_rank)  # type: ignore[arg-type]
    assert (modes[logs.OUT], modes[logs.ERR]) == (out, err)


def test_line_prefix() -> None:
    assert logs.line_prefix(None, "default", 5, 1) == b"[default1]:"
    assert logs.line_prefix("${role_name}-${rank}/${local_rank}| ", "w", 5, 1) == b"w-5/1| "


def test_attempt_dirs(tmp_path: Path) -> None:
    run = logs.make_run_dir(str(tmp_path / "base"), "rid")
    assert Path(run).parent == tmp_path / "base" and Path(run).name.startswith("rid_")
    adir = logs.make_attempt_dir(run, 1, 2)
    assert sorted(os.listdir(adir)) == ["0", "1"]
    assert logs.rank_file(adir, 1, "error.json") == f"{run}/attempt_1/1/error.json"
    assert logs.make_run_dir(os.devnull, "rid") == os.devnull
    assert logs.rank_file(os.devnull, 0, "error.json") == ""
