"""torchrun's grammar -> the resolver's canonical argv (pure; torchrun's parser is compared
against in tests/process/test_torchrun_dropin.py)."""

from __future__ import annotations

import pytest

from trainlaunch.agent.grammar import normalize
from trainlaunch.errors import UsageError

OPTIONS = {
    "--nproc-per-node": "nproc_per_node",
    "--nproc_per_node": "nproc_per_node",
    "--nproc": "nproc_per_node",
    "--max-restarts": "max_restarts",
    "--max-retries": "max_retries",
    "--redirects": "redirects",
    "-r": "redirects",
    "--module": "m",
    "-m": "m",
    "--script": "script",
    "--debug": "debug",
    "--no-python": "no_python",
}
TAKES = {k for k in OPTIONS if k not in ("--debug", "--no-python")}


@pytest.mark.parametrize(
    "argv, want",
    [
        (["--nproc-per=2", "t.py", "-x"], ["--nproc-per-node=2", "--", "t.py", "-x"]),
        (["--max-re", "0", "t.py"], ["--max-restarts", "0", "--", "t.py"]),
        (["-m", "pkg", "--lr", "1"], ["-m", "pkg", "--", "--lr", "1"]),
        (["-m", "pkg", "--", "--lr"], ["-m", "pkg", "--", "--lr"]),
        (["--script", "t.py", "--steps", "3"], ["--script", "t.py", "--", "--steps", "3"]),
        (["t.py", "--", "--", "x"], ["--", "t.py", "--", "x"]),
        (["--deb", "-r", "3", "t.py"], ["--debug", "-r", "3", "--", "t.py"]),
        (["-mpkg", "a"], ["-m", "pkg", "--", "a"]),
        (["--", "t.py", "--", "a"], ["--", "t.py", "--", "a"]),
        (["--nproc", "2", "--help"], ["--nproc", "2", "--help"]),
    ],
)
def test_normalize(argv: list[str], want: list[str]) -> None:
    assert normalize(argv, OPTIONS, TAKES) == want


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--nproc_p=2", "--n=1", "t.py"], "ambiguous option: --n=1 could match --nnodes"),
        (["--max", "t.py"], "ambiguous option: --max could match --max-restarts, --max_restarts"),
        (["-m"], "the following arguments are required"),
    ],
)
def test_normalize_refuses_like_torchrun(argv: list[str], words: str) -> None:
    with pytest.raises(UsageError, match=words.replace("-", r"\-")):
        normalize(argv, OPTIONS, TAKES)
