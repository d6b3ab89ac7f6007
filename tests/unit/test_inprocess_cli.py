"""The in-process CLI (tests/conftest.py) answers as `python -m trainlaunch` does, and every
call starts from the same process state: nothing one call did is seen by the next."""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from tests.conftest import CLI, InProcessCLI

SAME_ANSWER = [
    ["--version"],
    ["nosuch"],
    ["run", "--bogus", "utils.echo"],
    ["run", "--json", "--bogus", "utils.echo"],
    ["status", "--json", "nope-1"],
    ["list", "--json"],
    ["list", "--state", "nosuch"],
    ["run", "--dryrun", "--seed", "7", "utils.echo", "--msg", "hi"],
    ["logs", "nope-1/x/y/z"],
    ["wait", "--timeout", "nan", "nope-1"],
    [],
]


@pytest.mark.parametrize("argv", SAME_ANSWER, ids=" ".join)
def test_the_same_answer_as_a_fresh_interpreter(
    cli: CLI, inprocess_cli: InProcessCLI, argv: list[str]
) -> None:
    real, here = cli(*argv), inprocess_cli(*argv)
    assert (here.returncode, here.stdout, here.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )


def test_a_json_error_after_a_json_document_in_the_same_process(
    inprocess_cli: InProcessCLI,
) -> None:
    assert json.loads(inprocess_cli("list", "--json").stdout) == []
    proc = inprocess_cli("status", "--json", "nope-1")  # a new command line: its own document
    assert proc.returncode == 4 and json.loads(proc.stdout)["exit_code"] == 4


def test_signal_handlers_do_not_outlive_the_call(cli: CLI, inprocess_cli: InProcessCLI) -> None:
    handle = cli.run("utils.echo")
    cli.wait(handle)
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    assert inprocess_cli("wait", handle).returncode == 0  # `wait` turns SIGTERM into Ctrl-C
    assert inprocess_cli("logs", "-f", handle).returncode == 0
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_file_component_is_loaded_afresh_by_each_call(inprocess_cli: InProcessCLI) -> None:
    comp = inprocess_cli.cwd / "comp.py"
    for word in ("first", "second"):
        comp.write_text(
            "from trainlaunch import specs\n\n"
            "def fn() -> specs.AppDef:\n"
            f"    return specs.AppDef('f', (specs.Role('f', 'echo', args=('{word}',)),))\n"
        )
        proc = inprocess_cli("run", "--dryrun", "comp.py:fn", check=True)
        assert word in proc.stdout
    assert not [m for m in sys.modules if m == "comp" or m.startswith("_trainlaunch_file_comp")]


def test_the_environment_and_working_directory_are_put_back(
    inprocess_cli: InProcessCLI,
) -> None:
    env, cwd, path = dict(os.environ), os.getcwd(), list(sys.path)
    proc = inprocess_cli("list", env={"TRAINLAUNCH_HOME": "relative"})
    assert proc.returncode == 2 and "must be an absolute path" in proc.stderr
    assert (dict(os.environ), os.getcwd(), sys.path) == (env, cwd, path)


def test_what_only_a_new_interpreter_reads_is_refused(inprocess_cli: InProcessCLI) -> None:
    with pytest.raises(ValueError, match="PYTHONPATH"):
        inprocess_cli("list", env={"PYTHONPATH": "/somewhere"})
    with pytest.raises(TypeError, match="use `cli`"):
        inprocess_cli.popen("list")
