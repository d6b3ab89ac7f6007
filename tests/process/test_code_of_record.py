"""The code of record: every app says which commit it was submitted from, dirty or not, with
or without a snapshot; outside git, or without a usable git, it says so and still runs."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI
from trainlaunch.schedulers.coderecord import NOT_GIT, TIMEOUT_S, code_record


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
    ).stdout.decode()


def project(tmp_path: Path) -> Path:
    repo = tmp_path / "proj"
    (repo / "src").mkdir(parents=True)
    (repo / "train.py").write_text("print('v1')\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "v1")
    return repo


def recorded(cli: CLI, handle: str) -> Any:
    doc = json.loads(cli("describe", "--json", handle, check=True).stdout)
    return doc["app"]["metadata"]["trainlaunch_run"]["code"]


def test_describe_shows_the_commit_and_a_dirty_trees_diff_without_a_snapshot(
    cli: CLI, tmp_path: Path
) -> None:
    repo = project(tmp_path)
    head = git(repo, "rev-parse", "HEAD").strip()
    clean = cli("run", "--no-snapshot", "utils.echo", "--msg", "hi", cwd=repo / "src", check=True)
    handle = clean.stdout.strip()
    code = recorded(cli, handle)
    assert code == {"git": {"root": str(repo), "commit": head, "dirty": False, "diff_sha256": None}}
    text = cli("describe", handle, check=True).stdout
    assert f"  code: git {head[:12]} (clean) in {repo}" in text.splitlines()

    (repo / "train.py").write_text("print('v2')\n")  # tracked, changed: dirty
    (repo / "notes.txt").write_text("untracked: not part of the diff\n")
    diff = subprocess.run(
        ["git", "-C", str(repo), "diff", "HEAD", "--binary", "--no-color", "--no-ext-diff",
         "--no-textconv"],
        check=True, capture_output=True,
    ).stdout  # fmt: skip
    handle = cli("run", "utils.echo", "--msg", "hi", cwd=repo, check=True).stdout.strip()
    code = recorded(cli, handle)["git"]
    assert code["dirty"] is True and code["commit"] == head
    assert code["diff_sha256"] == hashlib.sha256(diff).hexdigest()
    text = cli("describe", handle, check=True).stdout
    assert f"  code: git {head[:12]} (dirty: diff sha256 {code['diff_sha256'][:12]}) in {repo}" in (
        text.splitlines()
    )


def test_outside_git_and_without_git_it_says_so_and_the_app_runs(cli: CLI, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    handle = cli("run", "utils.echo", "--msg", "hi", cwd=plain, check=True).stdout.strip()
    assert recorded(cli, handle) == {"git": None, "why": "not in a git work tree"}
    assert "  code: not in a git work tree" in cli("describe", handle).stdout.splitlines()
    # no git on PATH: the submission goes on, and the record says why there is none
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("echo", "sh", "bash", "env"):
        found = subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip()
        if found:
            (bin_dir / tool).symlink_to(found)
    repo = project(tmp_path)
    handle = cli(
        "run", "utils.echo", "--msg", "hi", cwd=repo, env={"PATH": str(bin_dir)}, check=True
    ).stdout.strip()
    assert cli.wait(handle)["state"] == "SUCCEEDED"
    code = recorded(cli, handle)
    assert code["git"] is None and code["why"].startswith("not recorded: git: "), code


def fake_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    """A `git` first on PATH that runs script (its whole text, #! line included)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(script)
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_a_slow_git_is_cut_off_at_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a real `git` that hangs (a network file system, a huge cold repo): bounded, never waited
    fake_git(tmp_path, monkeypatch, f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
    (tmp_path / "elsewhere" / ".git").mkdir(parents=True)  # git is asked only where one is
    t = time.monotonic()
    code = code_record(str(tmp_path / "elsewhere"))
    took = time.monotonic() - t
    assert code == {"git": None, "why": f"not recorded: git took longer than {TIMEOUT_S:g} s"}
    assert took < 10, took  # cut off, not waited out (the fake git sleeps 30 s)


def test_outside_any_git_folder_no_git_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a `git` that leaves a mark: outside every .git it is never started; GIT_DIR asks it again
    mark = tmp_path / "git-ran"
    fake_git(
        tmp_path,
        monkeypatch,
        f"#!/bin/sh\ntouch {mark}\necho 'fatal: not a git repository' >&2\nexit 128\n",
    )
    monkeypatch.delenv("GIT_DIR", raising=False)
    plain = tmp_path / "plain" / "deep"
    plain.mkdir(parents=True)
    assert code_record(str(plain)) == {"git": None, "why": NOT_GIT}
    assert not mark.exists()
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "some.git"))
    assert code_record(str(tmp_path / "plain")) == {"git": None, "why": NOT_GIT}
    assert mark.exists()
