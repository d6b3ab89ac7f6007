"""A reader that goes away: `trainlaunch ... | head -1` (issue 13.8).

Exit 1 means "the app failed"; a closed stdout is not a failure: every command that writes
to stdout exits 0 (docs/cli.md), with nothing on stderr. Two readers: one that closed its
end before the command wrote anything (deterministic EPIPE at the first write), and a real
`head -1` in a shell pipeline on a command with more output than a pipe holds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.conftest import CLI
from tests.faults.fault_helpers import running_replicas


def _into_closed_pipe(cli: CLI, *args: str) -> subprocess.CompletedProcess[str]:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte
    try:
        return subprocess.run(
            [sys.executable, "-m", "trainlaunch", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=cli.env,
            cwd=cli.cwd,
            timeout=120,
        )
    finally:
        os.close(write)


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CLI, str, str]]:
    """A finished app with 5,000 log lines, and a running one that keeps printing."""
    root = tmp_path_factory.mktemp("pipes")
    (root / "work").mkdir()
    cli = CLI(root / "home", root / "work")
    done = cli.run("utils.sh", "--num-replicas", "2", "seq 5000")
    assert cli.wait(done)["state"] == "SUCCEEDED"
    live = cli.run("utils.sh", "while true; do echo tick; sleep 0.05; done")
    running_replicas(cli, live, 1)
    yield cli, done, live
    cli("stop", live)


def _commands(done: str, live: str) -> list[list[str]]:
    return [
        ["logs", done],
        ["logs", "--json", done],
        ["logs", "--raw", done],
        ["logs", "--regex", "1", done],
        ["logs", "-f", done],
        ["logs", "-f", live],
        ["logs", "-f", "--json", live],
        ["status", done],
        ["status", "--json", done],
        ["describe", done],
        ["list"],
        ["list", "--json"],
        ["wait", "--json", done],
        ["builtins"],
        ["runopts"],
        ["run", "--dryrun", "utils.echo"],
        ["--help"],
    ]


@pytest.mark.parametrize("n", range(17))
def test_closed_stdout_is_exit_0_for_every_command(apps: tuple[CLI, str, str], n: int) -> None:
    cli, done, live = apps
    args = _commands(done, live)[n]
    proc = _into_closed_pipe(cli, *args)
    assert proc.returncode == 0, (args, proc.returncode, proc.stderr)
    assert proc.stderr == "", (args, proc.stderr)


@pytest.mark.parametrize("follow", [False, True], ids=["logs", "logs-f"])
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_logs_into_head_1(apps: tuple[CLI, str, str], follow: bool, as_json: bool) -> None:
    cli, done, live = apps
    args = ["logs", *(["-f"] if follow else []), *(["--json"] if as_json else [])]
    target = live if follow else done
    script = (
        f'"$0" -m trainlaunch {" ".join(args)} {target} | head -1; echo "rc=${{PIPESTATUS[0]}}"'
    )
    proc = subprocess.run(
        ["bash", "-c", script, sys.executable],
        capture_output=True,
        text=True,
        env=cli.env,
        cwd=cli.cwd,
        timeout=120,
    )
    first, rc = proc.stdout.splitlines()
    assert ("tick" if follow else "1") in first, proc.stdout
    assert rc == "rc=0", (args, proc.stdout, proc.stderr)
    assert proc.stderr == "", proc.stderr
