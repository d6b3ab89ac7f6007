"""The list index: finished apps' list rows, cached beside the records and checked against them.

A finished app's row depends only on its ``app.json`` and ``state.json`` (see
``state.derive_status``: a terminal state.json is the whole story), so the row is cached with
the identity of both files (inode, size, mtime and ctime in ns). ``list`` stats the two files of every
app, uses the cached row where both are unchanged, and derives the row from the records
otherwise. A damaged record changes its identity, is derived again and shows as unreadable
exactly as ``status`` shows it; unreadable and running apps are never cached.

The index is a cache: a missing, stale or damaged index costs time, never a wrong row, and a
store we cannot write to (read-only, full) simply goes without it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainlaunch import store
from trainlaunch.errors import StoreError
from trainlaunch.specs import AppState

INDEX_FILE = ".list-index.json"  # dot-named: never taken for an app directory
VERSION = 1

_loads: Callable[[bytes], Any]
try:  # several times faster than json on a 10,000-app index (a dependency of trainlaunch)
    from orjson import loads as _loads
except ImportError:  # pragma: no cover
    _loads = json.loads

Key = list[int]
Entry = dict[str, Any]  # {"key": Key, "row": [state name, app name, created, msg]}


def record_key(app_dir: str) -> Key | None:
    """The identity of an app's two records; None when either is missing."""
    try:
        a = os.stat(app_dir + "/app.json")
        s = os.stat(app_dir + "/state.json")
    except OSError:
        return None
    # ctime too: a rewrite that restores size and mtime (os.utime) still changes ctime
    return [
        a.st_ino,
        a.st_size,
        a.st_mtime_ns,
        a.st_ctime_ns,
        s.st_ino,
        s.st_size,
        s.st_mtime_ns,
        s.st_ctime_ns,
    ]


def load(apps_dir: Path) -> dict[str, Entry]:
    """The cached entries by app id; empty when the index is missing or not ours."""
    try:
        with open(apps_dir / INDEX_FILE, "rb") as f:
            data = _loads(f.read())
    except (OSError, ValueError):  # orjson.JSONDecodeError is a ValueError
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return {}
    entries = data.get("apps")
    return entries if isinstance(entries, dict) else {}


def cached_row(entry: Any, key: Key | None) -> list[Any] | None:
    """The cached row when the entry is well-formed and its key matches the records'."""
    if key is None or type(entry) is not dict or entry.get("key") != key:
        return None
    row = entry.get("row")
    if type(row) is not list or len(row) != 4:
        return None
    state, name, created, msg = row
    if (
        state in _STATE_NAMES
        and type(name) is str
        and type(msg) is str
        and (created is None or type(created) is float or type(created) is int)
    ):
        return row
    return None


def recorded_final(app_dir: Path) -> bool:
    """Whether the supervisor's own record says the app ended (what makes a row cacheable).

    A status derived from liveness (a dead supervisor) may still change when somebody cleans
    up; only the supervisor's final record is fixed.
    """
    try:
        state = store.read_json_or_none(app_dir / "state.json")
    except StoreError:
        return False
    return isinstance(state, dict) and state.get("state") in FINAL_STATES


FINAL_STATES = frozenset(s.name for s in AppState if s.is_terminal)
_STATE_NAMES = frozenset(AppState.__members__)


def save(apps_dir: Path, entries: dict[str, Entry]) -> None:
    """Replace the index (best effort: the index is a cache, and list must work without it)."""
    with contextlib.suppress(StoreError, OSError):
        store.write_json(apps_dir / INDEX_FILE, {"version": VERSION, "apps": entries})
