"""The job dir of a Slurm job: made by this user alone, never through another user's file.

A job dir may be on a shared filesystem (``--cfg job_dir=/shared/${app_id}``), where job ids
are predictable: another user could plant ``/shared/<next id>`` (or a symlink by that name)
full of symlinks (``sbatch.sh`` to a file they read, ``batch.log`` to a file of yours that
slurmd would append to). So the job dir is created here, exclusively (an existing one is
refused, whoever made it); each of its parents must be yours or root's, reached through no
other user's symlink, and not writable by every user unless sticky (``/tmp``); files are
created with O_EXCL|O_NOFOLLOW. Inside the new 0700 dir nobody else can plant anything, so
what Slurm and the batch script write there later is safe (issue 23 #3, docs/slurm.md).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from trainlaunch import store
from trainlaunch.errors import StoreError
from trainlaunch.specs import macros

HINT = (
    "another user may have planted it: use a job_dir with ${app_id} under a directory only "
    "you (or root) can change, e.g. the default $TRAINLAUNCH_HOME/slurm/jobs/${app_id}"
)


def _refuse(path: str | Path, why: str) -> StoreError:
    return StoreError(f"refusing job dir {path}: {why}", hint=HINT)


def _untrusted(path: str, st: os.stat_result) -> str:
    """Why path (lstat'ed) cannot be a parent of a job dir; '' when it can."""
    link = stat.S_ISLNK(st.st_mode)
    if st.st_uid not in (os.getuid(), 0):
        what = "a symlink made by" if link else "owned by"
        return f"{path} is {what} uid {st.st_uid}, not you"
    if not link and st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return f"{path} is writable by every user and not sticky (like /tmp)"
    return ""


def _prefixes(path: str) -> list[str]:
    parts = Path(path).parts
    return [str(Path(*parts[: i + 1])) for i in range(len(parts))]


def check_parents(job_dir: str | Path, shown: str = "") -> None:
    """Refuse a job dir whose existing parents another user controls (StoreError naming
    shown, else the job dir)."""
    path = os.path.abspath(job_dir)
    shown = shown or path
    deepest = "/"
    for prefix in _prefixes(os.path.dirname(path)):
        try:
            st = os.lstat(prefix)
        except FileNotFoundError:
            break
        except OSError as e:
            raise _refuse(shown, f"cannot inspect {prefix}: {e.strerror}") from None
        if why := _untrusted(prefix, st):
            raise _refuse(shown, why)
        deepest = prefix
    real = os.path.realpath(deepest)  # where the trusted symlinks lead: checked the same way
    for prefix in _prefixes(real) if real != deepest else []:
        if why := _untrusted(prefix, os.lstat(prefix)):
            raise _refuse(shown, why)


def check_template(template: str) -> None:
    """Before submission: the parents of the job dir template (the part before ``${app_id}``),
    and a fixed job dir (no ``${app_id}``) must not exist yet."""
    path = os.path.abspath(template)
    if macros.app_id not in path:
        check_parents(path)
        if os.path.lexists(path):
            raise _refuse(path, _exists(path))
        return
    # "/a/${app_id}" and "/a/run-${app_id}": the parent is /a
    check_parents(path.split(macros.app_id)[0] + "_", shown=path)


_KINDS = ((stat.S_ISLNK, "symlink"), (stat.S_ISDIR, "directory"), (lambda _: True, "file"))


def _exists(path: str) -> str:
    st = os.lstat(path)
    whose = "yours" if st.st_uid == os.getuid() else f"uid {st.st_uid}'s"
    kind = next(k for t, k in _KINDS if t(st.st_mode))
    return f"it exists already (a {kind}, {whose}); a job dir is created new for each job"


def create(job_dir: str | Path) -> Path:
    """Create job_dir (0700) and its missing parents (0700); refuse an existing job dir and
    parents another user controls (StoreError)."""
    path = Path(os.path.abspath(job_dir))
    check_parents(path)
    for parent in reversed(path.parents):
        if os.path.lexists(parent):
            continue  # check_parents saw it
        try:
            os.mkdir(parent, 0o700)
        except FileExistsError:  # it was there, or appeared since the check: check it now
            if why := _untrusted(str(parent), os.lstat(parent)):
                raise _refuse(path, why) from None
        except OSError as e:
            raise _refuse(path, f"cannot create {parent}: {e.strerror}") from None
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        raise _refuse(path, _exists(str(path))) from None
    except OSError as e:
        raise _refuse(path, f"cannot create it: {e.strerror}") from None
    os.chmod(path, 0o700, follow_symlinks=False)  # whatever the umask took away
    return store.existing_private_dir(path) or path  # the store's rule: yours, private


def write_new(job_dir: Path, name: str, text: str) -> Path:
    """Write a new 0600 file in the job dir: O_EXCL|O_NOFOLLOW, never through a link."""
    path = job_dir / name
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as e:
        raise _refuse(job_dir, f"cannot create {name}: {e.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path


__all__ = ["check_parents", "check_template", "create", "write_new"]
