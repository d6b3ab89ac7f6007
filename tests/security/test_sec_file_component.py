"""`path/file.py:fn` executes that file and what it imports, nothing else in its directory.

The component's directory holds siblings whose import would leave a marker file: a plain
sibling, an __init__.py (the directory looks like a package), and files named like modules
that the CLI itself imports *after* loading the component (`queue` for `run --log`, ...). A
sibling the component does import is the positive control.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI

COMPONENT = """\
from trainlaunch import specs
{imports}

def fn(msg: str = "hi") -> specs.AppDef:
    return specs.AppDef(name="filecomp", roles=(specs.Role(
        name="filecomp", entrypoint="echo", args=(msg,)),))
"""
MARK = "open({marker!r}, 'a').write({name!r} + '\\n')\n"
# stdlib/third-party names the CLI imports lazily (after the component) on some path;
# found by diffing sys.modules around component loading for run/--dryrun/--wait/--log
LAZY_NAMES = [
    "queue", "rich", "shlex", "secrets", "threading", "fcntl", "select", "difflib",
    # imported where used since the CLI's start-up was trimmed (issue 17)
    "array", "base64", "binascii", "bz2", "hashlib", "hmac", "lzma", "selectors", "shutil",
    "socket", "struct", "subprocess", "tempfile", "zlib",
    # random is drawn from only where a sweep or a seed is (issue 21)
    "bisect", "random",
    # string and heapq only where a metrics template or a merge needs them (issue 26)
    "heapq", "string",
    # orjson where JSON is written, since `run` imports the hang and list modules where used
    "orjson",
]  # fmt: skip
SIBLINGS = ["evil", "__init__", "conftest", "setup", "sitecustomize", "usercustomize", *LAZY_NAMES]


@pytest.fixture
def project(reaper: CLI) -> tuple[Path, Path]:
    d = reaper.cwd / "proj"
    d.mkdir()
    marker = reaper.cwd / "executed.txt"
    for name in SIBLINGS:
        (d / f"{name}.py").write_text(MARK.format(marker=str(marker), name=name))
    (d / "helper.py").write_text(MARK.format(marker=str(marker), name="helper"))
    (d / "comp.py").write_text(COMPONENT.format(imports=""))
    (d / "comp_imports_helper.py").write_text(COMPONENT.format(imports="import helper"))
    return d, marker


def _executed(marker: Path) -> list[str]:
    return sorted(set(marker.read_text().split())) if marker.exists() else []


@pytest.mark.parametrize(
    "mode",
    [
        ["--dryrun"],
        ["--log"],
        *[
            pytest.param(m, marks=pytest.mark.slow)
            for m in (["--dryrun", "--json"], [], ["--wait"])
        ],
    ],
    ids=lambda m: " ".join(m) or "detached",
)
def test_only_the_named_file_runs(reaper: CLI, project: tuple[Path, Path], mode: list[str]) -> None:
    cli = reaper
    d, marker = project
    proc = cli("run", *mode, f"{d}/comp.py:fn", "--msg", "from the file")
    assert proc.returncode == 0, proc.stderr
    assert _executed(marker) == [], "sibling files were executed"
    if mode in ([], ["--wait"], ["--log"]):
        handle = proc.stdout.splitlines()[0]
        assert cli.wait(handle)["state"] == "SUCCEEDED"


@pytest.mark.slow
def test_relative_path_from_another_directory(reaper: CLI, project: tuple[Path, Path]) -> None:
    cli = reaper
    d, marker = project
    proc = cli("run", "--dryrun", "proj/comp.py:fn")
    assert proc.returncode == 0, proc.stderr
    assert _executed(marker) == []


def test_an_imported_sibling_does_run(reaper: CLI, project: tuple[Path, Path]) -> None:
    """Positive control: the marker mechanism works, and imports of siblings are allowed."""
    cli = reaper
    d, marker = project
    proc = cli("run", "--dryrun", f"{d}/comp_imports_helper.py:fn")
    assert proc.returncode == 0, proc.stderr
    assert _executed(marker) == ["helper"]


@pytest.mark.slow
def test_lazy_imports_after_loading_a_file_component_are_listed_here(reaper: CLI) -> None:
    """Keeps LAZY_NAMES honest: every top-level module the CLI imports after the component
    has been loaded must be among the siblings the test above plants."""
    cli = reaper
    d = cli.cwd / "probe"
    d.mkdir()
    (d / "probe.py").write_text(
        "import sys, atexit\nfrom trainlaunch import specs\nBEFORE = set(sys.modules)\n"
        "def fn() -> specs.AppDef:\n"
        "    atexit.register(lambda: open(" + repr(str(cli.cwd / "mods.json")) + ", 'a').write("
        "__import__('json').dumps(sorted(m for m in set(sys.modules) - BEFORE "
        "if '.' not in m and not m.startswith('_'))) + '\\n'))\n"
        "    return specs.AppDef(name='p', roles=(specs.Role(name='p', entrypoint='true'),))\n"
    )
    for mode in (["--dryrun"], ["--dryrun", "--json"], [], ["--wait"], ["--log"]):
        subprocess.run(
            [sys.executable, "-m", "trainlaunch", "run", *mode, f"{d}/probe.py:fn"],
            env=cli.env,
            cwd=cli.cwd,
            check=True,
            capture_output=True,
        )
    seen = set()
    for line in (cli.cwd / "mods.json").read_text().splitlines():
        seen.update(json.loads(line))
    assert seen <= set(LAZY_NAMES), f"update LAZY_NAMES with {sorted(seen - set(LAZY_NAMES))}"
