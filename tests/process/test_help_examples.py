"""Every command's `--help` shows an example, and the example runs (issue 22 #17).

The example is read from the help text a user sees and run through the real CLI against a
store holding a finished dist.ddp app (it logged `loss`) and a running one; the example's
handle is replaced by theirs, and a command that would submit gets `--dryrun`.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CLI, wait_until
from trainlaunch.cli import COMMANDS

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sweep" / "train_tiny.py"
SUBMITS = ("run", "rerun", "sweep")  # run with --dryrun: nothing is submitted
EXIT_CODES = {"doctor": (0, 1)}  # a check may fail on this machine; the example still runs
ON_THE_RUNNING_APP = ("stack", "stop")  # last: stop ends it


class Store:
    """A finished app that logged `loss` and a running one, both dist.ddp (role `train`)."""

    def __init__(self, cli: CLI) -> None:
        self.cli = cli
        shutil.copy(FIXTURE, cli.cwd / "train.py")  # the examples' train.py
        (cli.cwd / "sleeper.py").write_text("import time\ntime.sleep(120)\n")
        self.finished = cli.run("dist.ddp", "train.py", "--lr", "0.1", "--steps", "3")
        assert cli.wait(self.finished)["state"] == "SUCCEEDED"
        self.running = cli.run("dist.ddp", "sleeper.py")
        wait_until(lambda: cli.status(self.running)["state"] == "RUNNING", timeout=60)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    root = tmp_path_factory.mktemp("examples")
    (root / "work").mkdir()
    cli = CLI(root / "home", root / "work")
    made = Store(cli)
    yield made
    cli("stop", made.running)


def example(cli: CLI, command: str) -> list[str]:
    """The first command line under `Example:`/`Examples:` in `trainlaunch COMMAND --help`."""
    text = cli(command, "--help", check=True).stdout
    lines = text.splitlines()
    heads = [i for i, ln in enumerate(lines) if ln.strip() in ("Example:", "Examples:")]
    assert heads, f"`trainlaunch {command} --help` shows no example:\n{text}"
    first = lines[heads[0] + 1].split("#", 1)[0]
    argv = shlex.split(first)
    assert argv[:2] == ["trainlaunch", command], first
    return argv[1:]


def with_handles(argv: list[str], store: Store, command: str) -> list[str]:
    handle = store.running if command in ON_THE_RUNNING_APP else store.finished
    out = []
    for arg in argv:
        if arg.startswith("local://"):  # the example's handle (with /role/replica for logs)
            example_handle = "/".join(arg.split("/")[:4])
            arg = arg.replace(example_handle, handle, 1)
        out.append(arg)
    if command in SUBMITS:
        out.insert(1, "--dryrun")
    return out


ORDER = sorted(COMMANDS, key=lambda c: c in ON_THE_RUNNING_APP and ON_THE_RUNNING_APP.index(c) + 1)


@pytest.mark.parametrize("command", ORDER)
def test_every_commands_help_shows_an_example_that_runs(store: Store, command: str) -> None:
    cli = store.cli
    argv = with_handles(example(cli, command), store, command)
    if command == "ui":  # serves until Ctrl-C: it runs when it prints its page's URL
        proc = cli.popen(*argv, "--port", "0", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            url = proc.stdout.readline() if proc.stdout else ""
            assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else ""
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        return
    proc = cli(*argv, timeout=180)
    assert proc.returncode in EXIT_CODES.get(command, (0,)), (argv, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr


def test_sweep_help_shows_the_int_form(store: Store) -> None:
    assert "LO:HI[:log|:int]" in store.cli("sweep", "--help", check=True).stdout


def test_rerun_help_lists_debug_and_takes_it(store: Store) -> None:
    assert "--debug" in store.cli("rerun", "--help", check=True).stdout
    # and `rerun --debug H` is trainlaunch's --debug, not a handle named '--debug'
    proc = store.cli("rerun", "--debug", "--dryrun", store.finished)
    assert proc.returncode == 0 and "malformed" not in proc.stderr, proc.stderr
