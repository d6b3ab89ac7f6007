"""Code snapshots: copy the files a job will run into its directory when it is submitted.

A job that waits in a queue must run the code it was submitted with, not whatever the
working tree holds when it starts. :func:`plan` decides what to copy (pure but for reading
the tree and asking git); :func:`take` copies it; :func:`relocate` rewrites a replica's
working directory, arguments and ``PYTHONPATH`` so that they point into the copy.

* In a git repository: every file ``git ls-files -co --exclude-standard`` lists (tracked
  files and untracked ones that are not ignored, uncommitted changes included); the commit
  and whether the tree was dirty are recorded.
* Elsewhere: the working directory, without the usual tool and cache directories.
* In both, ``.trainlaunchignore`` (glob patterns, one a line, ``#`` comments) leaves files
  out, files over ``MAX_FILE_BYTES`` are skipped, and a snapshot over ``MAX_TOTAL_BYTES``
  or ``MAX_FILES`` is refused with a hint (``--no-snapshot``).
* A directory that is itself a snapshot (it holds ``SNAPSHOT_META``) is copied as it is,
  keeping its commit: ``trainlaunch rerun`` runs the original's code again.
* Shared by content where the caller gives an object store (the local backend:
  ``$TRAINLAUNCH_HOME/snapshots``): each file is kept once, read-only, named by its SHA-256,
  and every snapshot is a tree of hard links to those files. A 20-point sweep of a 10 MiB
  project adds ~10 MiB, not 20 copies (issue 23 #23); new files a job writes into its
  directory stay its own. The store's files are bounded in all (``store_limit``): a snapshot
  that would pass the bound is refused with the sizes and what to do; files no snapshot
  links any more (their apps deleted) are removed first.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainlaunch.errors import StoreError, UsageError
from trainlaunch.values import frozen

SNAPSHOT_DIR = "snapshot"  # inside the app's / job's directory
SNAPSHOT_META = ".trainlaunch-snapshot.json"  # inside the snapshot: what it is a copy of
IGNORE_FILE = ".trainlaunchignore"
MAX_FILE_BYTES = 20 * 1024 * 1024
MAX_TOTAL_BYTES = 200 * 1024 * 1024
MAX_FILES = 20_000
STORE_LIMIT_MIB = 2048  # the default bound on a store's shared snapshot files, in all
OBJECTS = "objects"  # in the object store: <sha256 two hex>/<sha256>[.x]
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "__pycache__",
        "node_modules",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".ipynb_checkpoints",
    }
)
GIT_TIMEOUT_S = 30.0


@frozen
class SnapshotPlan:
    """What a snapshot will hold: files relative to source, and where they came from."""

    source: str  # the directory copied (git top level, the working dir, or a snapshot)
    cwd_rel: str  # the working directory relative to source ('.': source itself)
    files: tuple[str, ...]
    size: int  # bytes
    kind: str  # git | dir | snapshot
    commit: str | None = None
    dirty: bool | None = None
    skipped: tuple[str, ...] = ()  # left out for their size

    def to_dict(self) -> dict[str, Any]:
        """What the records keep (no file list)."""
        return {
            "source": self.source,
            "cwd_rel": self.cwd_rel,
            "kind": self.kind,
            "commit": self.commit,
            "dirty": self.dirty,
            "files": len(self.files),
            "size": self.size,
            "skipped": list(self.skipped),
        }

    def summary(self) -> str:
        """One line for dryrun and describe."""
        return summary(self.to_dict())

    @classmethod
    def from_dict(cls, rec: Mapping[str, Any], files: Sequence[str]) -> SnapshotPlan:
        """The plan back from to_dict() and its file list (it travels in the request)."""
        return cls(
            source=str(rec["source"]),
            cwd_rel=str(rec["cwd_rel"]),
            files=tuple(files),
            size=int(rec["size"]),
            kind=str(rec["kind"]),
            commit=rec.get("commit"),
            dirty=rec.get("dirty"),
            skipped=tuple(rec.get("skipped") or ()),
        )


def summary(record: Mapping[str, Any]) -> str:
    """One line from a recorded snapshot: files, size, source, commit, dirty."""
    commit = record.get("commit")
    where = f"git {str(commit)[:12] if commit else '(no commit)'}" + (
        " + uncommitted changes" if record.get("dirty") else ", clean"
    )
    if record.get("kind") == "dir":
        where = "not a git repository"
    elif record.get("kind") == "snapshot":
        where = "an earlier snapshot" + (f": {where}" if commit else "")
    size = record.get("size")
    size = size if isinstance(size, int) else 0
    line = f"{record.get('files')} files, {human_size(size)} from {record.get('source')} ({where})"
    if record.get("path"):
        line += f" -> {record['path']}"
    return line


def human_size(n: int) -> str:
    """1536 -> '1.5 KiB'."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _git(cwd: str, *args: str) -> str | None:
    import subprocess  # snapshots only: every `run` imports this module, most take none

    try:
        proc = subprocess.run(
            ["git", "-C", cwd, *args], capture_output=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.decode("utf-8", "surrogateescape") if proc.returncode == 0 else None


def _ignore_patterns(root: Path) -> list[str]:
    try:
        text = (root / IGNORE_FILE).read_text(encoding="utf-8")
    except OSError:
        return []
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def _ignored(rel: str, patterns: Sequence[str]) -> bool:
    import fnmatch

    name = rel.rsplit("/", 1)[-1]
    return any(
        fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(name, p) or rel.startswith(p.rstrip("/") + "/")
        for p in patterns
    )


def _walk(root: Path, exclude: Sequence[Path]) -> list[str]:
    out = []
    skip = {str(p) for p in exclude}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in SKIP_DIRS and os.path.join(dirpath, d) not in skip
        )
        for f in sorted(filenames):
            out.append(os.path.relpath(os.path.join(dirpath, f), root))
        if len(out) > MAX_FILES:
            break
    return out


def plan(cwd: str, exclude: Sequence[Path] = ()) -> SnapshotPlan:
    """Decide what to copy for a job submitted from cwd (exclude: e.g. the app store)."""
    cwd = os.path.abspath(cwd)
    meta = _read_meta(Path(cwd))
    commit: str | None = None
    dirty: bool | None = None
    if meta is not None:  # rerun: copy an earlier snapshot whole
        root, kind = Path(cwd), "snapshot"
        files = [f for f in _walk(root, ()) if f != SNAPSHOT_META]
        commit, dirty = meta.get("commit"), meta.get("dirty")
        cwd_rel = str(meta.get("cwd_rel") or ".")
    else:
        top = _git(cwd, "rev-parse", "--show-toplevel")
        if top:
            root, kind = Path(top.strip()), "git"
            listed = _git(str(root), "ls-files", "-z", "-co", "--exclude-standard") or ""
            files = sorted({f for f in listed.split("\0") if f})
            commit = (_git(str(root), "rev-parse", "HEAD") or "").strip() or None
            dirty = bool((_git(str(root), "status", "--porcelain") or "").strip())
        else:
            root, kind = Path(cwd), "dir"
            files = _walk(root, exclude)
        cwd_rel = os.path.relpath(cwd, root)
    patterns = _ignore_patterns(root)
    kept, skipped, total = [], [], 0
    excluded = [str(p) + os.sep for p in exclude]
    for rel in files:
        path = root / rel
        if _ignored(rel, patterns) or any(str(path).startswith(e) for e in excluded):
            continue
        try:
            st = path.lstat()
        except OSError:
            continue  # deleted but still tracked
        if path.is_dir() and not path.is_symlink():
            continue  # a submodule: not copied
        if st.st_size > MAX_FILE_BYTES:
            skipped.append(rel)
            continue
        kept.append(rel)
        total += st.st_size
    if len(kept) > MAX_FILES or total > MAX_TOTAL_BYTES:
        raise UsageError(
            f"the code snapshot of {root} would be {len(kept)} files, {human_size(total)} "
            f"(limits: {MAX_FILES} files, {human_size(MAX_TOTAL_BYTES)})",
            hint=f"list what to leave out in {root / IGNORE_FILE}, or run with --no-snapshot",
        )
    return SnapshotPlan(str(root), cwd_rel, tuple(kept), total, kind, commit, dirty, tuple(skipped))


OFF = ("off", "false", "no", "0", "none")
ON = ("on", "true", "yes", "1")


def from_option(value: object, cwd: str, exclude: Sequence[Path] = ()) -> SnapshotPlan | None:
    """The plan the ``snapshot`` option asks for: on, off, or an earlier snapshot's directory."""
    text = str(value if value is not None else "off").strip()
    if text.lower() in OFF:
        return None
    if text.lower() in ON:
        return plan(cwd, exclude)
    return _earlier(text)


def _earlier(path: str) -> SnapshotPlan:
    """An earlier snapshot (a rerun's), checked whole now: a rerun runs exactly that code or
    is refused naming what is gone, never today's code instead (issue 23 #8, #18)."""
    hint = "--cfg snapshot=on runs a new snapshot of today's code, snapshot=off the working tree"
    meta = _read_meta(Path(path))
    if meta is None:
        if not os.path.isdir(path):
            raise UsageError(f"the code snapshot {path} is gone (deleted?)", hint=hint)
        if os.path.lexists(os.path.join(path, SNAPSHOT_META)):
            raise UsageError(f"the code snapshot {path} is damaged ({SNAPSHOT_META})", hint=hint)
        raise UsageError(
            f"{path} is not on, off or a snapshot directory (it has no {SNAPSHOT_META})",
            hint=hint,
        )
    p = plan(path)
    paths = meta.get("paths")
    paths = paths if isinstance(paths, list) else []
    gone = [str(f) for f in paths if not os.path.lexists(os.path.join(path, str(f)))]
    count = meta.get("files")
    lost = count - len(p.files) if isinstance(count, int) else 0  # a copy from before "paths"
    if gone or lost > 0:
        what = f"{gone[0]} is missing" if gone else f"{lost} of its files are missing"
        raise UsageError(f"the code snapshot {path} is incomplete: {what}", hint=hint)
    return p


def _read_meta(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((path / SNAPSHOT_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def take(
    p: SnapshotPlan, dest: Path, objects: Path | None = None, limit_mib: int = STORE_LIMIT_MIB
) -> None:
    """Copy the planned files into dest (created here) and describe them in SNAPSHOT_META.

    With an object store (``objects``), a file is a hard link to the store's one copy of its
    content, added there if new, within ``limit_mib`` for the store's files in all.
    """
    import shutil

    dest.mkdir(parents=True, exist_ok=False)
    root = Path(p.source)
    shared = _Objects(objects, limit_mib) if objects is not None else None
    for rel in p.files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            if shared is None or not shared.link(root / rel, target):
                shutil.copy2(root / rel, target, follow_symlinks=False)
        except FileNotFoundError:
            continue  # deleted since the plan
        except OSError as e:
            raise UsageError(
                f"cannot snapshot {root / rel}: {e.strerror or e}",
                hint="run with --no-snapshot to run from the working tree",
            ) from None
    meta = {**p.to_dict(), "paths": list(p.files)}  # a rerun checks the copy is whole
    (dest / SNAPSHOT_META).write_text(json.dumps(meta, sort_keys=True), encoding="utf-8")
    _make_private(dest)


def _make_private(dest: Path) -> None:
    """Only the owner may read the copy (the job dir holds it; so may secrets in the code):
    directories 0700, files keep their owner bits (a script stays executable); a shared file
    (a hard link) is the store's, already private and read-only."""
    for top, _dirs, files in os.walk(dest):
        os.chmod(top, 0o700)
        for name in files:
            path = os.path.join(top, name)
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode) and st.st_nlink == 1:
                os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)


# the digest of a file this process has read, by what would change with its content: a
# sweep's points hash the project once, not once a point (a 10,000-point sweep)
_DIGESTS: dict[tuple[int, int, int, int, int], str] = {}


class _Objects:
    """The store's files, each once by content: ``objects/ab/abcd....[.x]`` (``.x``: the
    owner may execute it), read-only, hard-linked into every snapshot that holds it."""

    def __init__(self, root: Path, limit_mib: int) -> None:
        self.dir = root / OBJECTS
        self.limit = limit_mib << 20
        self.used: int | None = None  # bytes held, counted when the first new file comes

    def link(self, source: Path, target: Path) -> bool:
        """Make target the store's copy of source; False for what is not a regular file
        (a symlink is copied as one) or where no link can be made (another filesystem,
        the link limit): the caller copies it."""
        st = os.lstat(source)
        if not stat.S_ISREG(st.st_mode):
            return False
        executable = bool(st.st_mode & stat.S_IXUSR)
        digest = self._digest(source, st)
        obj = self.dir / digest[:2] / (digest + (".x" if executable else ""))
        if not obj.exists():
            self._add(source, obj, st.st_size, executable)
        try:
            os.link(obj, target)
        except OSError:
            return False
        return True

    def _digest(self, source: Path, st: os.stat_result) -> str:
        import hashlib

        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        digest = _DIGESTS.get(key)
        if digest is None:
            h = hashlib.sha256()
            with open(source, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            digest = _DIGESTS[key] = h.hexdigest()
        return digest

    def _add(self, source: Path, obj: Path, size: int, executable: bool) -> None:
        import shutil
        import tempfile

        if self.used is None:
            self.used = self._collect()
        if self.used + size > self.limit:
            raise StoreError(
                f"the app store's code snapshots would hold {human_size(self.used + size)}, "
                f"over their limit of {human_size(self.limit)} ({self.dir.parent}); "
                f"{source} alone is {human_size(size)}",
                hint="delete apps you no longer need (their snapshot files go with the next "
                "snapshot), raise --cfg snapshot_store_mib, or run with --no-snapshot",
            )
        for d in (self.dir.parent, self.dir, obj.parent):  # private, as the whole store
            with contextlib.suppress(FileExistsError):
                d.mkdir(mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=obj.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out, open(source, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
            os.chmod(tmp, 0o500 if executable else 0o400)
            os.replace(tmp, obj)  # whole or not at all: another submission may race us
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self.used += size

    def _collect(self) -> int:
        """Remove what no snapshot links any more (one link left: the store's); the bytes
        the rest holds."""
        used = 0
        if not self.dir.is_dir():
            return 0
        for sub in os.scandir(self.dir):
            if not sub.is_dir(follow_symlinks=False):
                continue
            for entry in os.scandir(sub.path):
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                # a temporary file is another submission's, being written, until it is old
                gone = (
                    time.time() - st.st_mtime > 3600
                    if entry.name.startswith(".")
                    else (st.st_nlink <= 1)
                )
                if gone:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
                    continue
                used += st.st_size
        return used


def relocate(
    p: SnapshotPlan,
    dest: str,
    args: Sequence[str],
    env: Mapping[str, str],
    environ: Mapping[str, str],
) -> tuple[str, tuple[str, ...], dict[str, str]]:
    """(cwd, args, env) of a replica that runs from the snapshot at dest.

    Absolute arguments that name a snapshotted file, and PYTHONPATH entries inside the
    source, point into the copy; relative paths resolve there because the cwd does.
    """
    source = p.source.rstrip("/")
    files = set(p.files)

    def moved(path: str) -> str:
        if path == source:
            return dest
        if path.startswith(source + "/"):
            return dest + path[len(source) :]
        return path

    new_args = tuple(
        moved(a) if a.startswith(source + "/") and a[len(source) + 1 :] in files else a
        for a in args
    )
    new_env = dict(env)
    pythonpath = env.get("PYTHONPATH", environ.get("PYTHONPATH", ""))
    if pythonpath:
        entries = pythonpath.split(os.pathsep)
        new = os.pathsep.join(moved(os.path.abspath(e)) if e else e for e in entries)
        if new != os.pathsep.join(os.path.abspath(e) if e else e for e in entries):
            new_env["PYTHONPATH"] = new
    cwd = dest if p.cwd_rel == "." else f"{dest}/{p.cwd_rel}"
    return cwd, new_args, new_env


__all__ = [
    "SNAPSHOT_DIR",
    "SNAPSHOT_META",
    "SnapshotPlan",
    "from_option",
    "human_size",
    "plan",
    "summary",
    "relocate",
    "take",
]
