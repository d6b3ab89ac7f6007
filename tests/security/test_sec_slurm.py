"""Slurm job directories are private, and `logs` says why it has nothing (issue 13: 7 and 9).

Against the real cluster (tests/slurm/conftest.py's fixtures: skipped, saying why, where no
cluster answers; a failure under TRAINLAUNCH_REQUIRE_SLURM=1). The CLI runs in a subprocess
with the submitting shell's umask set to 022, the usual default that made everything 0644.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.slurm.conftest import slurm_nodes  # noqa: F401 (fixture)


def _cli(home: Path, cwd: Path, *args: str, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TRAINLAUNCH_HOME": str(home),
        "TRAINLAUNCH_CONFIG": "",
        "PYTHONPATH": str(REPO),
    }
    return subprocess.run(
        [sys.executable, "-m", "trainlaunch", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=240,
        umask=umask,
    )


@pytest.fixture
def where(slurm_nodes: int, tmp_path: Path) -> tuple[Path, Path]:  # noqa: F811
    work = tmp_path / "work"
    work.mkdir()
    return tmp_path / "home", work


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_job_dir_and_its_files_are_private(where: tuple[Path, Path]) -> None:
    home, work = where
    run = _cli(
        home,
        work,
        "run",
        "-s",
        "slurm",
        "--wait",
        "--no-snapshot",  # the app runs in `work`: its own files stay there (see below)
        "utils.sh",
        "--env",
        "API_TOKEN=hunter2",
        "echo out; echo err >&2; touch own-file; mkdir own-dir",
    )
    assert run.returncode == 0, run.stderr
    job_id = run.stdout.split()[0].rsplit("/", 1)[1]
    job_dir = home / "slurm" / "jobs" / job_id
    assert "hunter2" in (job_dir / "sbatch.sh").read_text()  # the secret is in there: hence

    loose = []
    for path in [job_dir, *job_dir.rglob("*")]:
        want = 0o700 if path.is_dir() else 0o600
        if _mode(path) & ~want:
            loose.append(f"{oct(_mode(path))} {path.relative_to(job_dir.parent)}")
    assert loose == [], "readable by other users:\n" + "\n".join(loose)
    assert _mode(home / "slurm" / "jobs") == 0o700
    for name in ("sbatch.sh", "batch.log", "sh/0/stdout.log", "sh/0/stderr.log"):
        assert (job_dir / name).is_file(), name

    # the app's own files keep the submitting user's umask (022), as on the local backend
    assert _mode(work / "own-file") == 0o644
    assert _mode(work / "own-dir") == 0o755


def test_logs_of_a_job_trainlaunch_has_no_record_of_says_so(where: tuple[Path, Path]) -> None:
    """A job that exists in Slurm but is not in this user's index (another shell, sbatch)."""
    home, work = where
    sub = subprocess.run(
        ["sbatch", "--parsable", "--wrap", "echo not ours", "-o", "/dev/null"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sub.returncode == 0, sub.stderr
    job_id = sub.stdout.strip().split(";")[0]
    try:
        logs = _cli(home, work, "logs", f"slurm://trainlaunch/{job_id}")
    finally:
        subprocess.run(["scancel", job_id], capture_output=True, timeout=30)
    assert logs.returncode == 4, (logs.returncode, logs.stderr)
    assert logs.stdout == ""
    errors = [ln for ln in logs.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "no record" in errors[0], logs.stderr


def test_logs_of_a_job_whose_directory_was_deleted_says_so(where: tuple[Path, Path]) -> None:
    home, work = where
    run = _cli(home, work, "run", "-s", "slurm", "--wait", "utils.echo", "--msg", "gone")
    assert run.returncode == 0, run.stderr
    handle = run.stdout.split()[0]
    shutil.rmtree(home / "slurm" / "jobs" / handle.rsplit("/", 1)[1])
    for args in (["logs", handle], ["logs", "--json", handle], ["logs", f"{handle}/echo/0"]):
        logs = _cli(home, work, *args)
        assert logs.returncode == 5, (args, logs.returncode, logs.stderr)
        if "--json" in args:  # the error is the one JSON document on stdout
            doc = json.loads(logs.stdout)
            assert doc["exit_code"] == 5 and "is gone" in doc["error"], doc
        else:
            assert logs.stdout == ""
            assert logs.stderr.startswith("error:") and "is gone" in logs.stderr, logs.stderr
