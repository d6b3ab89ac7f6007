"""trainlaunch.schedulers.snapshot: what is copied, from git or a plain directory, and where it runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from trainlaunch.errors import UsageError
from trainlaunch.schedulers import snapshot


def _git(root: Path, *args: str) -> None:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root), *args]
    subprocess.run(cmd, check=True, capture_output=True)


def test_git_tree_with_untracked_and_uncommitted_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / ".gitignore").write_text("data/\n*.ckpt\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "x")
    (tmp_path / "sub" / "new.py").write_text("x = 1\n")  # untracked, not ignored
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "big.bin").write_bytes(b"0" * 100)  # ignored
    (tmp_path / "model.ckpt").write_text("w")  # ignored
    p = snapshot.plan(str(tmp_path / "sub"))
    assert p.kind == "git" and p.dirty is True and p.commit and len(p.commit) == 40
    assert set(p.files) == {".gitignore", "train.py", "sub/new.py"} and p.cwd_rel == "sub"
    dest = tmp_path.parent / (tmp_path.name + "-snap")
    snapshot.take(p, dest)
    assert (dest / "sub" / "new.py").read_text() == "x = 1\n"
    again = snapshot.plan(str(dest))  # a snapshot of a snapshot keeps the commit
    assert (again.kind, again.commit, again.dirty, again.cwd_rel) == (
        "snapshot",
        p.commit,
        True,
        "sub",
    )
    assert set(again.files) == set(p.files)


def test_plain_directory_skips_caches_ignore_file_and_big_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for d in (".venv", "__pycache__", "logs"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "f").write_text("x")
    (tmp_path / "a.py").write_text("a")
    (tmp_path / snapshot.IGNORE_FILE).write_text("# comment\nlogs/\n")
    (tmp_path / "huge.bin").write_bytes(b"0" * 2048)
    monkeypatch.setattr(snapshot, "MAX_FILE_BYTES", 1024)
    p = snapshot.plan(str(tmp_path))
    assert p.kind == "dir" and p.commit is None and p.dirty is None
    assert set(p.files) == {"a.py", snapshot.IGNORE_FILE} and p.skipped == ("huge.bin",)


def test_a_snapshot_over_the_limit_is_refused_with_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.py").write_text("a" * 100)
    monkeypatch.setattr(snapshot, "MAX_TOTAL_BYTES", 10)
    with pytest.raises(UsageError) as e:
        snapshot.plan(str(tmp_path))
    assert "--no-snapshot" in (e.value.hint or "")


def test_excluded_directories_are_not_copied(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "state.json").write_text("{}")
    (tmp_path / "a.py").write_text("a")
    assert snapshot.plan(str(tmp_path), exclude=[tmp_path / "home"]).files == ("a.py",)


def test_relocate_points_cwd_args_and_pythonpath_into_the_copy() -> None:
    p = snapshot.SnapshotPlan("/src", "sub", ("sub/t.py", "lib/m.py"), 3, "git")
    cwd, args, env = snapshot.relocate(
        p,
        "/job/snapshot",
        ("python", "/src/sub/t.py", "/src/data.csv", "t.py"),
        {},
        {"PYTHONPATH": "/src/lib:/elsewhere"},
    )
    assert cwd == "/job/snapshot/sub"
    assert args == ("python", "/job/snapshot/sub/t.py", "/src/data.csv", "t.py")
    assert env == {"PYTHONPATH": "/job/snapshot/lib:/elsewhere"}


def test_the_option_is_on_off_or_a_snapshot_directory(tmp_path: Path) -> None:
    assert snapshot.from_option("off", str(tmp_path)) is None
    assert snapshot.from_option(None, str(tmp_path)) is None
    assert snapshot.from_option("on", str(tmp_path)) is not None
    with pytest.raises(UsageError, match="not on, off or a snapshot directory"):
        snapshot.from_option(str(tmp_path), str(tmp_path))


def test_backends_dryrun_say_what_they_will_copy_and_run_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainlaunch import settings
    from trainlaunch.schedulers import get_scheduler
    from trainlaunch.specs import AppDef, Role

    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("print(1)\n")
    monkeypatch.chdir(work)
    environ = {settings.HOME: str(tmp_path / "home")}
    app = AppDef("t", [Role("t", "python", ("train.py", str(work / "train.py")))])

    local = get_scheduler("local", "s", environ=environ).submit_dryrun(app, {"snapshot": "on"})
    [replica] = local.request["replicas"]
    dest = tmp_path / "home" / "apps" / local.app_id / "snapshot"
    assert replica["cwd"] == str(dest)
    assert replica["cmd"] == ["python", "train.py", str(dest / "train.py")]
    assert f"# snapshot: 1 files, 9 B from {work} (not a git repository)" in str(local)
    off = get_scheduler("local", "s", environ=environ).submit_dryrun(app, {})
    assert off.request["replicas"][0]["cwd"] == str(work) and "snapshot" not in off.request

    slurm = get_scheduler("slurm", "s", environ=environ).submit_dryrun(app, {})
    script = str(slurm)
    job_dir = f"{tmp_path}/home/slurm/jobs"
    assert f"# code snapshot: 1 files, 9 B from {work}" in script
    assert f'cd -- {job_dir}/"$SLURM_JOB_ID"/snapshot || exit 1' in script
    assert f'{job_dir}/"$SLURM_JOB_ID"/snapshot/train.py' in script
    assert slurm.request.snapshot.files == ("train.py",)
