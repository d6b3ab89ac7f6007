"""docs/cli.md against the code: every command and option, the exit codes, the env names.

The CLI is walked as click sees it (the lazy group's COMMANDS, each command's parameters), so a
new command or option fails here until docs/cli.md names it in that command's table row.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from tests.conftest import REPO
from trainlaunch import settings
from trainlaunch.cli import COMMANDS, EPILOG, cli
from trainlaunch.errors import ExitCode

CLI_MD = (REPO / "docs" / "cli.md").read_text()
# documented once for every command, above the table (not repeated in each row)
GLOBAL = {"--debug", "--version", "-h", "--help"}


def command(name: str) -> click.Command:
    """The subcommand as `trainlaunch NAME` runs it (global options added)."""
    found = cli.get_command(click.Context(cli), name)
    assert found is not None, name
    return found


def rows() -> dict[str, str]:
    """The command table: command name -> its row."""
    return {m[1]: m[0] for m in re.finditer(r"^\| `([a-z]+)\b.*$", CLI_MD, re.M)}


def spellings(cmd: click.Command) -> set[str]:
    """Every spelling of every option (`-s`, `--scheduler`, `--no-snapshot`, ...)."""
    return {
        o
        for p in cmd.params
        if isinstance(p, click.Option) and not p.hidden
        for o in (*p.opts, *p.secondary_opts)
    }


def test_the_table_has_one_row_per_command_and_no_other() -> None:
    assert sorted(rows()) == sorted(COMMANDS)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_option_is_in_its_commands_row(name: str) -> None:
    missing = (
        spellings(command(name)) - GLOBAL - {"--json"} - set(re.findall(r"-[-\w]+", rows()[name]))
    )
    assert not missing, f"docs/cli.md's `{name}` row does not name {sorted(missing)}"


def test_the_global_options_are_documented() -> None:
    assert spellings(cli) <= GLOBAL
    for option in GLOBAL:
        assert f"`{option}" in CLI_MD or f"/{option}`" in CLI_MD, option


def test_what_the_page_says_of_json_is_true() -> None:
    """ "Every command except X takes --json" names exactly the commands without it."""
    text = " ".join(CLI_MD.split())
    m = re.search(r"Every command(?: except ((?:`\w+`(?:, | and )?)+))? takes `--json`", text)
    assert m, "docs/cli.md no longer says which commands take --json"
    said = set(re.findall(r"`(\w+)`", m[1] or ""))
    assert said == {n for n in COMMANDS if "--json" not in spellings(command(n))}


def test_the_exit_code_table_is_exit_code() -> None:
    table = CLI_MD.split("## Exit codes", 1)[1]
    documented = [int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)]
    assert documented == sorted(int(c) for c in ExitCode)


def test_the_help_epilog_names_every_exit_code() -> None:
    for code in ExitCode:
        assert re.search(rf"(^|[\s,]){int(code)} [a-z]", EPILOG), code


def _names_in(paths: list[Path]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        found |= set(re.findall(r"TRAINLAUNCH_[A-Z0-9_]*[A-Z0-9]", path.read_text()))
    # a prefix that code matches with startswith (TRAINLAUNCH_EXPORT) is not a variable
    return {n for n in found if not any(o.startswith(n + "_") for o in found)}


def test_every_environment_variable_is_documented() -> None:
    """settings.py's names, and the ones only tests, scripts and CI read, are in docs/."""
    declared = {v for v in vars(settings).values() if isinstance(v, str)}
    names = {n for n in declared if n.startswith("TRAINLAUNCH_")}
    sources = [
        p
        for d in ("trainlaunch", "components", "tests", "scripts", "bench", ".ci")
        for p in sorted((REPO / d).rglob("*"))
        if p.is_file() and (p.suffix in (".py", ".sh", "") and "__pycache__" not in p.parts)
    ]
    names |= _names_in(sources)
    pages = [REPO / "README.md", REPO / "bench" / "README.md", *(REPO / "docs").glob("*.md")]
    docs = "\n".join(p.read_text() for p in pages)
    assert sorted(n for n in names if n not in docs) == []


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    block = readme.split("Run the whole test suite", 1)[1].split("```bash\n", 1)[1]
    command = block.split("\n```", 1)[0].strip()
    ci = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()]
    assert [ln for ln in ci if "pytest" in ln and not ln.startswith("#")] == [command]
    assert command.startswith("python -m pytest")
    options = command.removeprefix("python -m pytest").split()
    assert not {"-m", "-k"} & set(options) and not any(o.startswith("tests") for o in options)


def test_the_fast_tier_is_one_command_in_readme_and_development_md() -> None:
    tier = 'python -m pytest -n auto -m "not slow and not slurm"'
    assert tier in (REPO / "README.md").read_text()
    assert tier in (REPO / "docs" / "development.md").read_text()
