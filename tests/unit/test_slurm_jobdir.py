"""The Slurm job dir is created new and private, never through another user's file (issue 23
#3). Real directories and symlinks; "another user" is uid 65534, set with chown (root only).
tests/slurm/test_slurm_secrets.py plants them as that user against the real cluster."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from trainlaunch.errors import StoreError
from trainlaunch.schedulers.slurm import jobdir

OTHER = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """Like /tmp: everyone may create entries, nobody may remove another's."""
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o1777)
    return d


def test_a_new_job_dir_and_its_missing_parents_are_private(shared: Path) -> None:
    job = jobdir.create(shared / "runs" / "17")
    for d in (job, job.parent):
        st = d.lstat()
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        assert st.st_uid == os.getuid()
    f = jobdir.write_new(job, "sbatch.sh", "#!/bin/bash\n")
    assert stat.S_IMODE(f.stat().st_mode) == 0o600 and f.read_text() == "#!/bin/bash\n"


def test_an_existing_job_dir_is_refused_even_ones_own(shared: Path) -> None:
    (shared / "17").mkdir(mode=0o700)
    with pytest.raises(StoreError, match=r"refusing job dir .*/17: it exists already"):
        jobdir.create(shared / "17")


def test_files_are_never_written_through_a_link(shared: Path, tmp_path: Path) -> None:
    job = jobdir.create(shared / "17")
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (job / "batch.log").symlink_to(victim)
    with pytest.raises(StoreError, match="cannot create batch.log"):
        jobdir.write_new(job, "batch.log", "x")
    assert victim.read_text() == "precious\n"


@as_root
def test_a_planted_job_dir_or_link_of_another_user_is_refused(shared: Path) -> None:
    planted = shared / "17"
    planted.mkdir(mode=0o777)
    os.chown(planted, OTHER, OTHER)
    with pytest.raises(StoreError, match=r"exists already \(a directory, uid 65534's\)"):
        jobdir.create(planted)
    link = shared / "18"
    link.symlink_to(planted)
    os.lchown(link, OTHER, OTHER)
    with pytest.raises(StoreError, match=r"exists already \(a symlink, uid 65534's\)"):
        jobdir.create(link)


@as_root
def test_parents_another_user_controls_are_refused(shared: Path) -> None:
    theirs = shared / "theirs"
    theirs.mkdir(mode=0o777)
    os.chown(theirs, OTHER, OTHER)
    with pytest.raises(StoreError, match=r"theirs/\$\{app_id\}: .*theirs is owned by uid 65534"):
        jobdir.check_template(f"{theirs}/${{app_id}}")
    link = shared / "link"  # their symlink to a directory of ours
    ours = shared / "ours"
    ours.mkdir()
    link.symlink_to(ours)
    os.lchown(link, OTHER, OTHER)
    with pytest.raises(StoreError, match=r"link is a symlink made by uid 65534"):
        jobdir.create(link / "17")
    mine = shared / "mine"  # our own symlink: fine, and where it leads is checked too
    mine.symlink_to(ours)
    assert jobdir.create(mine / "17").is_dir()
    mine_to_theirs = shared / "mine2"
    mine_to_theirs.symlink_to(theirs)
    with pytest.raises(StoreError, match=r"theirs is owned by uid 65534"):
        jobdir.create(mine_to_theirs / "17")


def test_a_parent_everyone_may_write_needs_the_sticky_bit(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)  # anyone could rename our job dir away and put a link in its place
    with pytest.raises(StoreError, match=r"writable by every user and not sticky"):
        jobdir.create(loose / "17")
    loose.chmod(0o1777)
    assert jobdir.create(loose / "17").is_dir()


def test_a_fixed_job_dir_that_exists_is_refused_before_submission(shared: Path) -> None:
    jobdir.check_template(f"{shared}/fixed")  # not there yet: fine
    (shared / "fixed").mkdir()
    with pytest.raises(StoreError, match=r"fixed: it exists already"):
        jobdir.check_template(f"{shared}/fixed")
    jobdir.check_template(f"{shared}/${{app_id}}")  # the id's dir is checked when created
