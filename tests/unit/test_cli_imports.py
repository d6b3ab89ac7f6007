"""The CLI never imports torch, numpy or a cluster SDK."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "numpy", "kubernetes", "yaml")


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["list", "--json"],
        ["builtins"],
        ["status", "local://trainlaunch/nope-1"],
        ["sweep", "--dryrun", "--param", "x=1,2", "--seeds", "1", "utils.sh", "echo {x}"],
        ["status", "sweep:abcdefghij"],
    ],
)
def test_cli_paths_stay_light(argv: list[str], tmp_path) -> None:
    code = (
        "import sys, json\n"
        "from trainlaunch.cli.boundary import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"TRAINLAUNCH_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    assert loaded == []


def test_import_direction_rank_library_is_isolated() -> None:
    code = (
        "import sys, trainlaunch.cli, trainlaunch.runner, trainlaunch.schedulers.local.backend\n"
        "print([m for m in sys.modules if m.startswith('trainlaunch.rank')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
