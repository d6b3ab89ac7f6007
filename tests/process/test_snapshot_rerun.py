"""Code snapshots and `rerun` on the local backend: a waiting app runs the code it was
submitted with, `describe` shows the commit and dirty flag, and a rerun reproduces the
original's metrics bit for bit (same seed, same snapshot)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CLI

TRAIN = """\
import os, random, time
from pathlib import Path

go = Path(os.environ["GO_FILE"])
while not go.exists():  # the app waits: its code may change meanwhile
    time.sleep(0.05)
import helper  # imported only now: from the snapshot, not the edited tree

rng = random.Random(int(os.environ["TRAINLAUNCH_SEED"]))
for step in range(5):
    print("metric", step, helper.f(rng.random()).hex())
print("code", helper.VERSION)
"""


def _git(work: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(work), *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def _helper(work: Path, version: str, factor: int) -> None:
    (work / "helper.py").write_text(
        f"VERSION = {version!r}\n\ndef f(x):\n    return x * {factor}\n"
    )


def _metrics(cli: CLI, handle: str) -> list[str]:
    out = cli("logs", handle, check=True).stdout.splitlines()
    return [ln.split(" ", 1)[1] for ln in out if " metric " in ln or " code " in ln]


@pytest.mark.slow  # 9 CLI calls and 3 apps: 20-40 s on a busy 2-core machine
def test_waiting_app_runs_submitted_code_and_rerun_reproduces_it(cli: CLI, tmp_path: Path) -> None:
    work, go = cli.cwd, tmp_path / "go"
    (work / "train.py").write_text(TRAIN)
    _helper(work, "v1", 2)
    _git(work, "init", "-q")
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "v1")
    _helper(work, "v1-uncommitted", 2)  # submitted with an uncommitted change
    args = ("--snapshot", "--seed", "11", "utils.python", "--env", f"GO_FILE={go}", "train.py")
    dry = cli("run", "--dryrun", *args, check=True).stdout
    assert "# snapshot: 2 files" in dry and "uncommitted changes" in dry
    handle = cli.run(*args)
    _helper(work, "v2", 3)  # edited while the app waits
    go.write_text("go")
    assert cli.wait(handle)["state"] == "SUCCEEDED"
    original = _metrics(cli, handle)
    assert original[-1] == "code v1-uncommitted" and len(original) == 6

    doc = json.loads(cli("describe", "--json", handle, check=True).stdout)
    snap = doc["metadata"]["snapshot"]
    assert snap["commit"] == _git(work, "rev-parse", "HEAD") and snap["dirty"] is True
    assert snap["kind"] == "git" and snap["files"] == 2
    text = cli("describe", handle, check=True).stdout
    assert "snapshot: 2 files" in text and "uncommitted changes" in text

    again = cli("rerun", handle, check=True).stdout.strip()
    assert cli.wait(again)["state"] == "SUCCEEDED"
    assert _metrics(cli, again) == original  # bit for bit: same seed, same code
    text = cli("describe", again, check=True).stdout
    assert f"rerun of: {handle}" in text and "seed=11" in text

    other = cli("rerun", "--seed", "12", handle, check=True).stdout.strip()
    assert cli.wait(other)["state"] == "SUCCEEDED"
    changed = _metrics(cli, other)
    assert changed[-1] == "code v1-uncommitted" and changed[:5] != original[:5]


def test_rerun_of_an_unknown_app_is_not_found(cli: CLI) -> None:
    proc = cli("rerun", "local://trainlaunch/nope-2345678923")
    assert proc.returncode == 4 and proc.stderr.startswith("error: ")


def test_rerun_from_another_directory_runs_the_snapshot(cli: CLI, tmp_path: Path) -> None:
    (cli.cwd / "prog.py").write_text("print('from the snapshot')\n")
    handle = cli.run("--snapshot", "utils.python", "prog.py")
    assert cli.wait(handle)["state"] == "SUCCEEDED"
    elsewhere = tmp_path / "elsewhere"  # no prog.py here: the snapshot holds it (issue 22 #2)
    elsewhere.mkdir()
    again = cli("rerun", handle, cwd=elsewhere, check=True).stdout.strip()
    assert cli.wait(again)["state"] == "SUCCEEDED"
    assert cli("logs", again, check=True).stdout.endswith("from the snapshot\n")


def test_rerun_dryrun_follows_run_dryruns_placeholder_rule(cli: CLI, inprocess_cli: CLI) -> None:
    handle = cli.run("--seed", "5", "utils.sh", "--env", "API_TOKEN=hunter2", "true")
    assert cli.wait(handle)["state"] == "SUCCEEDED"
    first, again = (inprocess_cli("rerun", "--dryrun", handle, check=True) for _ in range(2))
    assert first.stdout == again.stdout  # issue 22 #6: a new concrete app id each time
    assert "<app-id: assigned at submission>" in first.stdout and "hunter2" not in first.stdout
    assert "dryrun of app 'sh' on local: nothing was submitted" in first.stderr
    assert "seed: 5" in first.stderr  # the original's, kept
    doc = json.loads(inprocess_cli("rerun", "--dryrun", "--json", handle, check=True).stdout)
    assert doc["app_id"] == "<app-id: assigned at submission>"
