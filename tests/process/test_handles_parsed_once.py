"""A HANDLE argument is parsed once, where it enters; the value travels on (no re-parsing)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import CLI

# runs one command in-process and counts the calls of the handle parser (a profiler: nothing
# is patched); prints the count last on stderr
COUNT = """
import sys
from trainlaunch import handles
from trainlaunch.cli.boundary import main

parser, calls = handles.parse_app_handle.__code__, []
sys.setprofile(lambda frame, event, arg: event == "call" and frame.f_code is parser
               and calls.append(1))
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.setprofile(None)
print(len(calls), file=sys.stderr)
"""


def parses(cli: CLI, *argv: str) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", COUNT, *argv],
        capture_output=True,
        text=True,
        env=cli.env,
        cwd=cli.cwd,
        timeout=120,
    )
    return int(proc.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "argv",
    [
        ("rerun", "{h}"),
        ("stop", "{h}"),
        ("status", "{h}"),
        ("wait", "{h}"),
        ("describe", "{h}"),
        ("logs", "{h}"),
        ("metrics", "--json", "{h}"),
    ],
)
def test_each_command_parses_its_handle_once(cli: CLI, argv: tuple[str, ...]) -> None:
    handle = cli.run("utils.echo", "--msg", "hi")
    cli.wait(handle)
    assert parses(cli, *(a.format(h=handle) for a in argv)) == 1
