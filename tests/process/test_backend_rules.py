"""One rule per idea across backends: handle sessions, broken backends, params, list order."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI, InProcessCLI
from trainlaunch.errors import UsageError
from trainlaunch.runner import get_runner


def test_a_handle_of_another_session_is_not_found_and_hints_the_real_one(cli: CLI) -> None:
    handle = cli.run("utils.echo")
    app_id = handle.rsplit("/", 1)[1]
    cli.wait(handle)
    other = cli("status", f"local://someoneelse/{app_id}")
    assert other.returncode == 4, other.stderr
    assert f"no app {app_id} in session 'someoneelse'" in other.stderr
    assert f"hint: its handle is {handle}" in other.stderr
    assert other.stdout == "" and "Traceback" not in other.stderr
    for cmd in (["logs"], ["stop"], ["wait"], ["describe"]):
        assert cli(*cmd, f"local://someoneelse/{app_id}").returncode == 4, cmd
    assert cli("status", "--json", app_id, check=True)  # a bare id means the CLI's session


def test_apps_of_a_python_session_keep_their_handle(
    cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(cli.home))
    monkeypatch.chdir(cli.cwd)
    with get_runner("exp1") as runner:
        handle = runner.run_component("utils.echo", ["--msg", "x"])
        assert handle.startswith("local://exp1/")
        runner.wait(handle)
    assert cli.status(handle)["state"] == "SUCCEEDED"
    listed = json.loads(cli("list", "--json", check=True).stdout)
    rows = listed["apps"] if isinstance(listed, dict) else listed
    assert handle in json.dumps(rows)  # list prints the app's own session, not the CLI's
    app_id = handle.rsplit("/", 1)[1]
    assert cli("status", f"local://trainlaunch/{app_id}").returncode == 4


def _broken_plugin(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    info = site / "tlbroken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tlbroken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[trainlaunch.schedulers]\nbroken = tlbroken_backend_that_is_not_there\n"
    )
    return site


def test_a_backend_that_fails_to_import_is_shown_with_its_error(cli: CLI, tmp_path: Path) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(_broken_plugin(tmp_path)), *sys.path])}
    text = cli("runopts", env=env)
    assert text.returncode == 0, text.stderr
    assert "local:" in text.stdout and "broken: cannot be loaded" in text.stdout
    assert (
        "ModuleNotFoundError" in text.stdout and "tlbroken_backend_that_is_not_there" in text.stdout
    )
    doc = cli("runopts", "--json", env=env)
    assert json.loads(doc.stdout)["broken"] is None and "local" in json.loads(doc.stdout)
    assert "warning: scheduler 'broken' cannot be loaded" in doc.stderr
    one = cli("runopts", "broken", env=env)
    assert one.returncode == 3 and "error: scheduler 'broken' cannot be loaded" in one.stderr
    assert "Traceback" not in one.stderr


def test_scheduler_params_one_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    with pytest.raises(UsageError, match="unknown scheduler parameter.*namepsace.*valid: "):
        get_runner(namepsace="team")
    from trainlaunch.schedulers.local.backend import create_scheduler as local
    from trainlaunch.schedulers.slurm.backend import create_scheduler as slurm

    for create in (local, slurm):
        with pytest.raises(UsageError, match="unknown .* scheduler parameter.*: namespace"):
            create("s", namespace="team")
    # a param of one backend is given to that backend only: local still works
    with get_runner(namespace="team") as runner:
        assert runner.list_apps("local") == []


def test_slurm_refuses_since_and_until_like_a_usage_error() -> None:
    from trainlaunch.schedulers.slurm.backend import create_scheduler

    for kw in ({"since": 1.0}, {"until": 2.0}):
        with pytest.raises(UsageError, match="not supported on slurm"):
            create_scheduler("s").log_iter("123", "role", 0, **kw)  # refused before any I/O


def test_dryrun_shows_the_rank_plan_of_node_agents_only(inprocess_cli: InProcessCLI) -> None:
    (inprocess_cli.cwd / "t.py").write_text("")  # the local backend checks that the script exists
    ddp = inprocess_cli(
        "run", "--dryrun", "dist.ddp", "--nproc-per-node", "2", "t.py", check=True
    ).stdout
    assert "[t/0 ranks]" in ddp and "rank 1 (local 1):" in ddp and "WORLD_SIZE=2" in ddp
    doc = json.loads(
        inprocess_cli("run", "--dryrun", "--json", "dist.ddp", "t.py", check=True).stdout
    )
    assert doc["replicas"][0]["node_agent"] is True
    echo = inprocess_cli("run", "--dryrun", "utils.echo", check=True).stdout
    assert "ranks]" not in echo
