"""A sweep's record: ``$TRAINLAUNCH_HOME/sweeps/<id>/sweep.json``, whatever its scheduler.

The record names the component, its arguments and every point with the handle of its app
once submitted. While a sweep is being submitted, each handle is appended to ``handles.jsonl``
beside the record as soon as its app exists (one short write: rewriting the whole record per
point made a 10,000-point sweep quadratic), and the record is rewritten once at the end;
readers merge the two, so a crash half-way still names what was submitted. Readers never
create the store.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainlaunch import store
from trainlaunch.errors import AppNotFound, StoreError
from trainlaunch.handles import SWEEP_PREFIX, SweepHandle, check_sweep_id, make_app_handle

RECORD = "sweep.json"
JOURNAL = "handles.jsonl"  # points submitted since the record was last written, one a line


def sweep_dir(sweep_id: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where a sweep's record lives (the store is created if needed: for writers)."""
    root = store.ensure_private_dir(store.store_root(environ))
    return store.ensure_private_dir(root / "sweeps") / check_sweep_id(sweep_id)


def sweep_handle(scheduler: str, session: str, sweep_id: str) -> str:
    """``scheduler://session/sweep:ID``."""
    return make_app_handle(scheduler, session, SWEEP_PREFIX + sweep_id)


def write_sweep(record: Mapping[str, Any]) -> None:
    """Write (or rewrite) a sweep's record atomically."""
    path = sweep_dir(str(record["id"]))
    path.mkdir(mode=0o700, exist_ok=True)
    store.write_json(path / RECORD, dict(record))


STOPPED = "stopped"  # beside the record: `stop SWEEP` ran; nothing more of it is submitted


def request_stop(sweep_id: str) -> None:
    """Mark the sweep stopped: a submission still under way submits no more points."""
    path = store.store_root() / "sweeps" / check_sweep_id(sweep_id)
    if path.is_dir():
        (path / STOPPED).touch(mode=0o600)


def stop_requested(sweep_id: str) -> bool:
    """Whether `stop` ran on the sweep."""
    return (store.store_root() / "sweeps" / check_sweep_id(sweep_id) / STOPPED).exists()


def read_sweep(sweep_id: str) -> dict[str, Any]:
    """The sweep record (AppNotFound if there is none); reading creates nothing."""
    root = store.store_root()
    path = root / "sweeps" / check_sweep_id(sweep_id) / RECORD
    try:
        if store.existing_private_dir(root) is None:
            raise FileNotFoundError(path)
        # the journal before the record: the submission writes the record whole, then removes
        # the journal, so one of the two names every handle; read the other way round, an
        # old record and a removed journal named none (a `stop SWEEP` then missed the points)
        journal = _journal_lines(path.parent / JOURNAL)
        record = store.read_json(path)
    except FileNotFoundError:
        raise AppNotFound(
            f"no sweep {sweep_id!r} in {path.parent.parent}",
            hint="`trainlaunch list` shows the known apps",
        ) from None
    if not isinstance(record, dict) or not isinstance(record.get("points"), list):
        raise StoreError(f"unreadable sweep record {path}")
    _merge_journal(record, journal)
    return record


def _journal_lines(path: Path) -> list[bytes]:
    """The journal's lines (none when there is no journal)."""
    try:
        return path.read_bytes().splitlines()
    except FileNotFoundError:
        return []


def _merge_journal(record: dict[str, Any], lines: list[bytes]) -> None:
    """Fill in the handles the journal names and the record does not (yet)."""
    points = record["points"]
    for line in lines:
        try:
            item = json.loads(line)
            i, handle = item["point"], item["handle"]
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a crash: that point's app was not recorded
        if (
            type(i) is int
            and 0 <= i < len(points)
            and isinstance(points[i], dict)
            and isinstance(handle, str)
            and not points[i].get("handle")
        ):
            points[i]["handle"] = handle


class Journal:
    """Appends the handles of a sweep's points as they are submitted (see the module doc)."""

    def __init__(self, sweep_id: str) -> None:
        path = sweep_dir(sweep_id) / JOURNAL
        self.path = path
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as e:
            raise StoreError(f"cannot write {path}: {e.strerror or e}") from None
        self._file = os.fdopen(fd, "a", encoding="utf-8")

    def add(self, point: int, handle: str) -> None:
        """Record that point (its position in the record) was submitted as handle."""
        try:
            self._file.write(json.dumps({"point": point, "handle": handle}) + "\n")
            self._file.flush()  # one write(2): a reader sees it at once
        except OSError as e:
            raise StoreError(f"cannot write {self.path}: {e.strerror or e}") from None

    def close(self) -> None:
        """Close it; the caller has written every handle into the record (remove=True) or not."""
        with contextlib.suppress(OSError):
            self._file.close()

    def remove(self) -> None:
        """The record names every handle now: the journal goes."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def list_sweeps(limit: int | None = None) -> list[dict[str, Any]]:
    """The newest sweeps of this store first: id, handle, component, points, max_parallel,
    created (an unreadable record is listed with its ``error``); reading creates nothing."""
    root = store.store_root()
    if store.existing_private_dir(root) is None or not (root / "sweeps").is_dir():
        return []
    dirs = sorted(
        (d for d in (root / "sweeps").iterdir() if (d / RECORD).is_file()),
        key=lambda d: (d / RECORD).stat().st_mtime,
        reverse=True,
    )
    out: list[dict[str, Any]] = []
    for d in dirs[:limit]:
        try:
            r = read_sweep(d.name)
        except (AppNotFound, StoreError, OSError, ValueError) as e:
            out.append({"id": d.name, "error": str(e)})
            continue
        out.append(
            {
                "id": d.name,
                "handle": sweep_handle(str(r["scheduler"]), str(r["session"]), d.name),
                "component": r.get("component"),
                "points": len(r["points"]),
                "max_parallel": r.get("max_parallel"),
                "created": r.get("created"),
            }
        )
    return out


def recorded_handle(handle: SweepHandle, record: Mapping[str, Any]) -> SweepHandle:
    """The sweep's handle as recorded (a bare ``sweep:ID`` gets its scheduler and session)."""
    return SweepHandle(str(record["scheduler"]), str(record["session"]), handle.sweep_id)


def point_of(app_metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep tag an app carries (``{}`` for an app that is not part of a sweep)."""
    tag = dict(app_metadata.get("trainlaunch") or {})
    return {k: tag[k] for k in ("sweep", "point") if k in tag}


__all__ = [
    "JOURNAL",
    "RECORD",
    "Journal",
    "list_sweeps",
    "point_of",
    "read_sweep",
    "recorded_handle",
    "request_stop",
    "stop_requested",
    "sweep_dir",
    "sweep_handle",
    "write_sweep",
]
