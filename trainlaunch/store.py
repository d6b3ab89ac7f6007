"""The app store under ``$TRAINLAUNCH_HOME``: private directories and atomic JSON records.

Layout of one local app (``apps/<app_id>/``)::

    app.json          the request, written once by the CLI (AppDef, cfg, settings, replicas)
    supervisor.json   pid + start ticks + boot id of the detached supervisor
    state.json        the live state, written by the supervisor only (atomically)
    supervisor.log    the supervisor's own diagnostics
    logs/<role>/<replica>/{stdout,stderr}.log, error.json, ...

Every write goes to a temporary file in the same directory, is fsynced and renamed over the
record, so no reader ever sees half a record. The store refuses to work in a directory another
user can write to.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainlaunch import settings
from trainlaunch.errors import StoreError, UsageError
from trainlaunch.handles import check_app_id

RECORD_VERSION = 1
_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"  # no 0/o/1/l: ids are read aloud and typed


def store_root(environ: Mapping[str, str] | None = None) -> Path:
    """The trainlaunch home: $TRAINLAUNCH_HOME (absolute, or ~/...) or the per-user state dir."""
    env = os.environ if environ is None else environ
    explicit = env.get(settings.HOME)
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_absolute():
            # relative to what? each shell, CI step and rank has its own cwd: one store each
            raise UsageError(
                f"{settings.HOME} must be an absolute path, got {explicit!r}",
                hint=f'export {settings.HOME}="$PWD/{explicit}"',
            )
        return path
    state = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "trainlaunch"


def _check_private(path: Path, st: os.stat_result) -> None:
    if st.st_uid != os.getuid():
        raise StoreError(
            f"refusing to use app store {path}: owned by uid {st.st_uid}, not you",
            hint=f"set {settings.HOME} to a directory you own",
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise StoreError(
            f"refusing to use app store {path}: writable by other users",
            hint=f"run: chmod go-w {path}",
        )


def ensure_private_dir(path: Path) -> Path:
    """Create path (0700) if needed; refuse one that others can write to or do not own."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError as e:
        raise StoreError(
            f"cannot create the app store at {path}: {e.strerror}",
            hint=f"set {settings.HOME} to a writable directory",
        ) from None
    _check_private(path, st)
    return path


def existing_private_dir(path: Path) -> Path | None:
    """path if it exists (refused like ensure_private_dir if not ours); None if it does not.

    Readers use this: a query never creates the store (a missing store has no apps).
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StoreError(f"cannot read the app store at {path}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise StoreError(
            f"cannot use the app store at {path}: not a directory",
            hint=f"set {settings.HOME} to a directory",
        )
    _check_private(path, st)
    return path


def apps_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The directory that holds one subdirectory per local app (created if needed)."""
    root = ensure_private_dir(store_root(environ))
    return ensure_private_dir(root / "apps")


def existing_apps_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The apps directory if the store exists (None: no apps yet); never creates anything."""
    root = existing_private_dir(store_root(environ))
    return None if root is None else existing_private_dir(root / "apps")


def new_app_id(name: str) -> str:
    """A fresh id: ``<name>-<10 random chars>``, valid as a file, DNS and job name."""
    # 32 letters: the low 5 bits of each random byte pick one, uniformly (os.urandom, not
    # `secrets`, whose import costs ~5 ms of every `run`: hmac and hashlib come with it)
    suffix = "".join(_ALPHABET[b & 31] for b in os.urandom(10))
    base = re.sub(r"[^a-z0-9]+", "-", name.lower())[:40].strip("-") or "app"
    return check_app_id(f"{base}-{suffix}")


def app_dir(app_id: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where app_id's records live (the id is checked: it cannot escape the store)."""
    base = existing_apps_dir(environ) or store_root(environ) / "apps"  # nothing created
    return base / check_app_id(app_id)


def create_app_dir(app_id: str, environ: Mapping[str, str] | None = None) -> Path:
    """Create the app's directory; fails if the id already exists."""
    path = apps_dir(environ) / check_app_id(app_id)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        raise StoreError(f"app id {app_id} already exists in the store") from None
    except OSError as e:
        raise StoreError(f"cannot create {path}: {e.strerror}") from None
    return path


def _write_error(path: Path, e: OSError) -> StoreError:
    err = StoreError(
        f"cannot write {path}: {e.strerror or e}",
        hint="check free disk space and permissions of the app store",
    )
    err.errno = e.errno
    return err


RESERVE_FILE = ".reserve"  # space held back so the app's final record fits on a full disk


def reserve_bytes(replicas: int) -> int:
    """How much to hold back: a final state.json (and its temporary copy) for this many."""
    return 64 * 1024 + 1024 * replicas


def reserve(path: Path, size: int) -> None:
    """Allocate size bytes in path/.reserve (StoreError, e.g. ENOSPC, if the disk cannot)."""
    try:
        fd = os.open(path / RESERVE_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as e:
                if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                os.write(fd, b"\0" * size)  # a filesystem without fallocate
        finally:
            os.close(fd)
    except OSError as e:
        raise _write_error(path / RESERVE_FILE, e) from None


def release_reserve(path: Path) -> bool:
    """Free the space reserve() held back; True if there was one."""
    try:
        os.unlink(path / RESERVE_FILE)
    except OSError:
        return False
    return True


def write_final_json(path: Path, data: Any) -> None:
    """write_json for a record that must land: on ENOSPC, spend the reserve and try again."""
    try:
        write_json(path, data)
    except StoreError as e:
        if e.errno != errno.ENOSPC or not release_reserve(path.parent):
            raise
        write_json(path, data)


def remove_app_dir(path: Path) -> None:
    """Delete a half-created app directory (its supervisor never started)."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def write_json(path: Path, data: Any) -> None:
    """Atomically replace path with data as JSON (0600)."""
    try:
        fd, tmp = _temp_file(path)
    except OSError as e:
        raise _write_error(path, e) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            # dumps, not dump: only the one-shot encoder is the C one (3x faster on app.json)
            f.write(json.dumps(data, separators=(",", ":"), sort_keys=True))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _write_error(path, e) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _temp_file(path: Path) -> tuple[int, str]:
    """A new 0600 file beside path, named ``.NAME.<random>.tmp`` (tempfile.mkstemp's contract,
    without importing tempfile and random on every submission)."""
    for _ in range(100):
        tmp = os.path.join(path.parent, f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(path.parent))


def read_json(path: Path) -> Any:
    """Read a JSON record; StoreError names the file when it is missing or corrupt."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e.strerror}") from None
    try:
        return json.loads(raw)
    except ValueError as e:
        raise StoreError(f"unreadable record {path}: {e}") from None


def read_json_or_none(path: Path) -> Any:
    """Like read_json, but None when the file does not exist."""
    try:
        return read_json(path)
    except FileNotFoundError:
        return None
