"""A line redrawn in place (a progress bar) reads as a terminal left it (issue 22 #24)."""

from __future__ import annotations

import pytest

from trainlaunch.logmerge.redraw import collapse, collapse_lines


@pytest.mark.parametrize(
    "line, shown",
    [
        ("plain", "plain"),
        ("\r 10%|#  |\r 50%|## |\r100%|###|", "100%|###|"),
        ("loss 0.123456\rloss 9", "loss 9.123456"),  # a shorter drawing leaves the rest
        ("done\r", "done"),  # a line ending in \r\n
        ("\r     \r", "     "),  # a bar that cleared itself
        ("\r 5%|█ |\r50%|██|", "50%|██|"),  # characters, not bytes
    ],
)
def test_collapse_is_what_a_terminal_shows(line: str, shown: str) -> None:
    assert collapse(line) == shown


def test_collapse_lines_keeps_the_ranks_prefix() -> None:
    chunk = b"[default0]:\rstep 1\rstep 2\n[default1]:plain\nno prefix\rlast\n\n"
    got = collapse_lines(chunk, [b"[default0]:", b"[default1]:"])
    assert got == b"[default0]:step 2\n[default1]:plain\nlastrefix\n\n"
    assert collapse_lines(b"no carriage return\n") == b"no carriage return\n"
    assert collapse_lines(b"\xff\rbad utf-8 \xfe\n") == b"bad utf-8 \xfe\n"  # bytes kept
