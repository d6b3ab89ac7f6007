"""Arguments and env values reach the replica byte-for-byte; no shell ever interprets them.

utils.binary and utils.python run a printer that dumps its argv and env as JSON; the
payloads are shell metacharacters that would create `pwned*` files if any shell saw them.
(utils.sh is shell text by design and documented as such, so it is not tested here.)
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI

PAYLOADS = [
    "$(touch pwned1)",
    "`touch pwned2`",
    "; touch pwned3",
    "| touch pwned4",
    "&& touch pwned5",
    "\ntouch pwned6\n",
    "x'; touch pwned7; echo '",
    'x"; touch pwned8; echo "',
    "$(<pwned9)",
    ">pwned10",
    "$HOME ${PATH} $((1+1)) $",
    "*",
    "~",
    "?",
    "a\\b\\\\c",
    "'single'",
    '"double"',
    "tab\there",
    "  leading and trailing  ",
    "",
    "-c",
    "--",
    "--flag=value",
    "non-ascii: é ü ß 日本語 🚀",
    "\x1b[31mred\x1b[0m",
    "\r\n",
    "=",
    "a=b",
    "%s %n %x",
    "{a,b}",
    "!!",
    "#comment",
]
# --env is KEY=VALUE,KEY2=VALUE2: a value cannot hold ',' (see docs/components.md)
ENV_PAYLOADS = [p for p in PAYLOADS if "," not in p]

PRINTER = """\
import json, os, sys
doc = {"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items() if k.startswith("FUZZ_")}}
sys.stdout.write(json.dumps(doc, ensure_ascii=True) + "\\n")
"""


@pytest.fixture
def printer(reaper: CLI) -> Path:
    path = reaper.cwd / "printer.py"
    path.write_text(PRINTER)
    return path


def _env_args() -> list[str]:
    out = []
    for i, value in enumerate(ENV_PAYLOADS):
        out += ["--env", f"FUZZ_{i}={value}"]
    return out


def _expected_env() -> dict[str, str]:
    return {f"FUZZ_{i}": v for i, v in enumerate(ENV_PAYLOADS)}


def _received(cli: CLI, handle: str) -> dict[str, object]:
    final = cli.wait(handle)
    assert final["state"] == "SUCCEEDED", final
    [stdout] = Path(final["log_dir"]).glob("*/0/stdout.log")
    lines = stdout.read_bytes().splitlines()
    assert len(lines) == 1, lines
    return json.loads(lines[0])


def _no_pwned(*dirs: Path) -> None:
    found = [str(p) for d in dirs for p in d.rglob("pwned*")]
    assert found == [], f"an injected command ran: {found}"


COMPONENTS = {
    "utils.binary": lambda printer: [
        "utils.binary",
        "--entrypoint",
        sys.executable,
        *_env_args(),
        "--",
        str(printer),
    ],
    "utils.python": lambda printer: ["utils.python", *_env_args(), str(printer)],
}


@pytest.mark.parametrize(
    "component", ["utils.binary", pytest.param("utils.python", marks=pytest.mark.slow)]
)
def test_arguments_and_env_arrive_byte_for_byte(reaper: CLI, printer: Path, component: str) -> None:
    cli = reaper
    handle = cli.run(*COMPONENTS[component](printer), *PAYLOADS)
    got = _received(cli, handle)
    assert got["argv"] == PAYLOADS
    assert got["env"] == _expected_env()
    _no_pwned(cli.cwd, cli.home, printer.parent)


def test_a_literal_double_dollar_arrives_unchanged(reaper: CLI, printer: Path) -> None:
    """`$$` is not one of the documented macros (${app_id}, ${replica_id}, ${rank0_env},
    ${img_root}); string.Template would turn it into `$`."""
    cli = reaper
    literal = ["echo $$", "awk '{print $$1}'", "cost: $$5"]
    handle = cli.run(*COMPONENTS["utils.binary"](printer), *literal)
    got = _received(cli, handle)
    assert got["argv"] == literal, "a literal '$$' in an argument was rewritten"


def test_dryrun_command_line_is_shell_safe(reaper: CLI, printer: Path) -> None:
    """--dryrun prints the command shell-quoted: pasted into a shell it is the same argv."""
    cli = reaper
    args = COMPONENTS["utils.binary"](printer)
    raw = subprocess.run(
        [sys.executable, "-m", "trainlaunch", "run", "--dryrun", *args, *PAYLOADS],
        env=cli.env,
        cwd=cli.cwd,
        capture_output=True,
        check=True,
    )
    text = raw.stdout.decode()  # bytes: text mode would turn the payload's \r\n into \n
    command = text.split("\n  $ ", 1)[1]
    assert shlex.split(command) == [sys.executable, str(printer), *PAYLOADS]
    doc = json.loads(cli("run", "--dryrun", "--json", *args, *PAYLOADS, check=True).stdout)
    assert doc["replicas"][0]["cmd"] == [sys.executable, str(printer), *PAYLOADS]
    for i, v in enumerate(ENV_PAYLOADS):
        assert doc["replicas"][0]["env"][f"FUZZ_{i}"] == v
    _no_pwned(cli.cwd, printer.parent)


@pytest.mark.slow
@pytest.mark.parametrize(
    "field,value",
    [
        ("--name", "$(touch pwned)"),
        ("--name", "a;touch pwned"),
        ("--entrypoint", "$(touch pwned)"),
    ],
)
def test_metacharacters_in_names_never_reach_a_shell(reaper: CLI, field: str, value: str) -> None:
    cli = reaper
    args = ["utils.binary", "--entrypoint", "true", field, value]
    if field == "--entrypoint":
        args = ["utils.binary", field, value]
    proc = cli("run", *args)
    if proc.returncode == 0:  # accepted: then it must fail to exec, not run a shell
        handle = proc.stdout.strip()
        final = cli.wait(handle)
        assert final["state"] == "FAILED" and final["exit_code"] == 127, final
    else:
        assert proc.returncode == 2, proc.stderr
    _no_pwned(cli.cwd, cli.home)


@pytest.mark.slow
def test_cfg_cwd_with_metacharacters(reaper: CLI) -> None:
    cli = reaper
    odd = cli.cwd / "dir $(touch pwned) ; `touch pwned2`"
    odd.mkdir()
    handle = cli.run("--cfg", f"cwd={odd}", "utils.binary", "--entrypoint", "pwd")
    final = cli.wait(handle)
    assert final["state"] == "SUCCEEDED"
    out = cli("logs", "--raw", handle, check=True).stdout
    assert out.splitlines() == [str(odd)]
    _no_pwned(cli.cwd.parent)
