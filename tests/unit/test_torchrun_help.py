"""`trainlaunch torchrun --help` is the help of the command a user runs (issue 22 #7, #27)."""

from __future__ import annotations

import pytest

from tests.conftest import InProcessCLI
from trainlaunch.agent import flags
from trainlaunch.cli.torchrun_help import asks_help


def test_torchrun_help_is_torchruns_options_described_plus_ours(
    inprocess_cli: InProcessCLI,
) -> None:
    # it printed the node agent's argparse help: --engine, --preflight, flags without a word
    # of description, and no --torchrun-exit-codes
    out = inprocess_cli("torchrun", "--help", check=True).stdout
    assert out.startswith("Usage: trainlaunch torchrun [--torchrun-exit-codes] [--merge[=fuzzy]]")
    assert "--engine" not in out and "--preflight" not in out
    assert "--torchrun-exit-codes" in out and "--merge[=fuzzy]" in out
    # item 27: the choices of --start-method and --numa-binding
    assert "--start-method {spawn,fork,forkserver}" in out
    assert "--numa-binding {node,socket,exclusive,core-complex}" in out
    for flag in flags.FLAGS:
        if flag.dest not in flags.NOT_TORCHRUNS:
            assert flag.flag in out and flag.help and flag.help in " ".join(out.split()), flag
    assert "Example:\n  trainlaunch torchrun --nproc-per-node 2 train.py" in out
    assert inprocess_cli("torchrun", "--nproc", "2", "-h", check=True).stdout == out


def test_torchruns_own_options_and_choices_are_all_in_the_help(
    inprocess_cli: InProcessCLI,
) -> None:
    run = pytest.importorskip("torch.distributed.run")
    out = " ".join(inprocess_cli("torchrun", "--help", check=True).stdout.split())
    for action in run.get_args_parser()._actions:
        if action.option_strings:
            assert action.option_strings[0] in out, action.option_strings
        if action.choices:
            assert "{" + ",".join(action.choices) + "}" in out, action.option_strings


@pytest.mark.parametrize(
    "argv,asked",
    [
        (["--help"], True),
        (["--standalone", "--nproc-per-node", "2", "-h"], True),
        (["-r3", "--help"], True),
        (["train.py", "--help"], False),  # the program's own --help
        (["-m", "pkg.train", "-h"], False),
        (["--log-dir", "d", "train.py", "-h"], False),
    ],
)
def test_help_is_ours_only_before_the_script(argv: list[str], asked: bool) -> None:
    assert asks_help(argv) is asked
