"""A fourth backend, as a plugin with only the required members: the CLI asks what it offers
(its capabilities) instead of naming backends, and what it leaves out is one error, exit 3."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI

PLUGINS = Path(__file__).parent.parent / "fixtures" / "plugins"


@pytest.fixture
def mini(tmp_path: Path) -> dict[str, str]:
    """The environment that installs tests/fixtures/plugins/tlmini.py as backend "mini"."""
    info = tmp_path / "site" / "tlmini-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tlmini\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[trainlaunch.schedulers]\nmini = tlmini\n")
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(PLUGINS), *sys.path])}


def test_what_a_backend_leaves_out_is_one_error_with_exit_3(cli: CLI, mini: dict[str, str]) -> None:
    run = cli("run", "-s", "mini", "utils.echo", "--msg", "hi", env=mini)
    assert run.returncode == 0, run.stderr
    handle = run.stdout.strip()
    assert handle.startswith("mini://trainlaunch/echo-")
    assert cli("status", "--json", handle, env=mini).returncode == 0
    for argv, what in (
        (["logs", handle], "logs"),
        (["stack", handle], "`stack`"),
        (["stop", "--requeue", handle], "requeuing an app on request"),
    ):
        out = cli(*argv, env=mini)
        assert out.returncode == 3, (argv, out.returncode, out.stderr)  # never 70
        assert f"error: the mini backend does not support {what}" in out.stderr
        assert "hint: backends that do: local" in out.stderr and "Traceback" not in out.stderr
    stopped = cli("stop", handle, env=mini)
    assert stopped.returncode == 0 and stopped.stdout == f"{handle}\tCANCELLED\n"
    assert cli("wait", handle, env=mini).returncode == 6


def test_options_and_help_come_from_what_the_backend_declares(
    cli: CLI, mini: dict[str, str]
) -> None:
    snap = cli("run", "-s", "mini", "--snapshot", "utils.echo", env=mini)
    assert snap.returncode == 2 and "the mini backend does not take code snapshots" in snap.stderr
    sweep = cli(
        "sweep", "-s", "mini", "--max-parallel", "2", "--param", "x=1,2", "utils.sh", "echo {x}",
        env=mini,
    )  # fmt: skip
    assert sweep.returncode == 2, sweep.stderr
    assert "--max-parallel on mini: enforced on local (queued on this machine)" in sweep.stderr
    assert "slurm (a job array)" in sweep.stderr
    # a sweep without a limit is one app per point, as on any backend
    many = cli("sweep", "-s", "mini", "--param", "x=1,2", "utils.sh", "echo {x}", env=mini)
    assert many.returncode == 0, many.stderr
    assert cli("stop", many.stdout.strip(), env=mini).stdout.count("CANCELLED") == 3
    assert "mini" in cli("run", "--help", env=mini).stdout  # -s lists the registry's names
    assert "note (str)" in cli("runopts", "mini", env=mini).stdout
