"""The CLI never imports torch, numpy or a cluster SDK."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

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
    assert _imported_by(argv, HEAVY, tmp_path) == []


def test_import_direction_rank_library_is_isolated() -> None:
    code = (
        "import sys, trainlaunch.cli, trainlaunch.runner, trainlaunch.schedulers.local.backend\n"
        "print([m for m in sys.modules if m.split('.')[:2] == ['trainlaunch', 'rank']])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# What the reading commands need not import (each costs start-up time on every call): the
# submission path's helpers, other backends, the terminal renderer when stdout is a pipe.
NOT_FOR_READERS = (
    "secrets",  # ids and seeds are drawn at submission
    "socket",  # ports are reserved at submission
    "subprocess",  # supervisors, nvidia-smi and py-spy run at submission or `stack`
    "tempfile",  # the store is written by writers only
    "difflib",  # "did you mean" is for usage errors
    "traceback",  # --debug and bugs only
    "trainlaunch.schedulers.snapshot",
    "trainlaunch.node.devices",
    "trainlaunch.schedulers.slurm.backend",
    "trainlaunch.schedulers.kubernetes.backend",
    "rich",
    "matplotlib",
)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["list"],
        ["list", "--json"],
        ["status", "--json", "local://trainlaunch/nope-1"],
        ["status", "local://trainlaunch/nope-1"],
        ["logs", "local://trainlaunch/nope-1"],
        ["status", "sweep:abcdefghij"],
    ],
)
def test_reading_commands_start_light(argv: list[str], tmp_path) -> None:
    assert _imported_by(argv, NOT_FOR_READERS, tmp_path) == []


# What a detached `run` (issue 26 #3: to the handle <= 1.5x `--help`) need not import, from a
# directory outside git with no --snapshot, no GPU and no template in the metrics path.
NOT_FOR_RUN = (
    "hashlib",  # the code of record hashes a diff only when there is one (OpenSSL: ~3 ms)
    "tempfile",  # the store names its temporary files itself (tempfile imports random)
    "random",
    "string",  # a metrics path with ${app_id} only
    "click.shell_completion",  # completion only
    "secrets",
    "difflib",
    "traceback",
    "rich",
    "trainlaunch.node.devices",
    "trainlaunch.schedulers.slurm.backend",
    "trainlaunch.schedulers.kubernetes.backend",
)


def test_a_detached_run_starts_light(tmp_path) -> None:
    assert _imported_by(["run", "utils.sh", "true"], NOT_FOR_RUN, tmp_path) == []


def _imported_by(argv: list[str], modules: Sequence[str], home: Path) -> list[str]:
    """Which of modules a real CLI run of argv has imported when it ends."""
    code = (
        "import sys, json\n"
        "from trainlaunch.cli.boundary import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(json.dumps([m for m in {list(modules)!r} if m in sys.modules]), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"TRAINLAUNCH_HOME": str(home), "PATH": "/usr/bin:/bin"},
        cwd=home,  # outside any git tree
    )
    loaded: list[str] = json.loads(proc.stderr.strip().splitlines()[-1])
    return loaded
