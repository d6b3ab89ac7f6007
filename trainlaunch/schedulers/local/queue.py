"""The queue of a slot group: an app waiting for a slot costs one empty file, no process.

A group's directory (``$TRAINLAUNCH_HOME/slots/<group>``) holds its slot locks (slots.py) and::

    queue/<time_ns>-<app_id>     an app waiting for a slot; names sort in submission order
    claimed/<time_ns>-<app_id>   taken from the queue by whoever starts (or cancels) it
    closed                       the group was stopped: nothing of it starts any more

Whoever holds a free slot starts the oldest queued app with it: the submitting CLI (which
queues its app, then takes a free slot if there is one), a supervisor that ends (it hands its
slot on: ``hand_off``), and every local command that reads a queued app (``kick``: a
supervisor killed with SIGKILL hands nothing on, and a reboot ends every supervisor; the queue
resumes with the next trainlaunch command). Taking an entry is an ``os.rename`` into
``claimed/``: of two that race for it, one wins and the other takes the next.

No wake-up is lost: an app is queued before its submitter tries the slots, and a holder that
found the queue empty closes its slot and looks once more.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainlaunch import store
from trainlaunch.errors import TrainlaunchError
from trainlaunch.schedulers.local import launch, slots

QUEUE, CLAIMED, CLOSED = "queue", "claimed", "closed"
SIZE = "size"  # the group's number of slots (its apps' requests say so too)
STOP_REQUEST = (
    "stop-requested"  # in an app's directory: a stop that came while it was handed a slot
)
CACHE_S = 1.0  # a command reading many queued apps lists each group (and kicks it) once a second
CLAIM_TIMEOUT_S = 30.0  # a claimed app whose supervisor is not recorded by then never will be

_seen: dict[str, tuple[float, list[str], int]] = {}  # group dir -> (when, queue, busy slots)


def group_dir(spec: Mapping[str, Any]) -> Path:
    """The group's directory."""
    return Path(spec["dir"])


def new_entry(app_id: str) -> str:
    """The queue entry of an app submitted now (names sort in submission order)."""
    return f"{time.time_ns():020d}-{app_id}"


def app_dir_of(spec: Mapping[str, Any], entry: str) -> Path:
    """The app directory an entry stands for (slots/<group>/ and apps/ share the store)."""
    return group_dir(spec).parent.parent / "apps" / entry.split("-", 1)[1]


def is_closed(spec: Mapping[str, Any]) -> bool:
    """Whether the group was stopped."""
    return (group_dir(spec) / CLOSED).exists()


def close(directory: Path) -> None:
    """Stop a group: none of its queued apps starts; they read as CANCELLED."""
    if directory.is_dir():
        (directory / CLOSED).touch(mode=0o600)


def enqueue(spec: Mapping[str, Any], entry: str) -> None:
    """Put the app in line (its app.json is written: whoever claims it can start it)."""
    path = group_dir(spec) / QUEUE / entry
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileNotFoundError:  # the group's first app: slots/<group>/{queue,claimed}/
        for folder in (path.parent.parent.parent, path.parent.parent, path.parent):
            folder.mkdir(mode=0o700, exist_ok=True)
        (group_dir(spec) / CLAIMED).mkdir(mode=0o700, exist_ok=True)
        store.write_json(group_dir(spec) / SIZE, int(spec["count"]))  # 0600, atomic
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)


def in_line(slots_root: Path, wanted: set[str]) -> dict[str, tuple[str, int, int, int, bool]]:
    """The wanted apps that wait in a queue, from one listing per group (no app record is
    read): app id -> (group, place in line from 1, slots held, slots, group closed)."""
    out: dict[str, tuple[str, int, int, int, bool]] = {}
    try:
        groups = [g for g in os.scandir(slots_root) if g.is_dir()]
    except FileNotFoundError:
        return out
    for g in groups:
        try:
            count = int((Path(g.path) / SIZE).read_text())
        except (OSError, ValueError):
            continue  # not a queue of this version: its apps are described one by one
        spec = {"dir": g.path, "count": count}
        closed = is_closed(spec)
        if not closed:
            kick_cached(spec)  # its free slots are used before it is described
        names = queued(spec)
        held = slots.busy(spec) if names and not closed else 0
        for place, name in enumerate(names, 1):
            app_id = name.split("-", 1)[1]
            if app_id in wanted:
                out[app_id] = (g.name, place, held, count, closed)
    return out


def queued(spec: Mapping[str, Any]) -> list[str]:
    """The entries waiting, oldest first."""
    try:
        names = os.listdir(group_dir(spec) / QUEUE)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if not n.startswith("."))


def claim(spec: Mapping[str, Any], entry: str) -> bool:
    """Take an entry out of the queue; False if someone else took it first."""
    d = group_dir(spec)
    try:
        os.rename(d / QUEUE / entry, d / CLAIMED / entry)
    except FileNotFoundError:
        return False
    return True


def unclaim(spec: Mapping[str, Any], entry: str) -> None:
    """The claimed app was started (its supervisor.json written) or ended: forget the entry."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(group_dir(spec) / CLAIMED / entry)


def hand_off(spec: Mapping[str, Any], fd: int) -> bool:
    """Start the oldest queued app with the slot locked by fd; False (fd closed) if none is."""
    try:
        if is_closed(spec):
            cancel_queued(spec)
            return False
        # the oldest first; an entry taken meanwhile, or one that cannot start, is skipped
        return any(claim(spec, e) and start_claimed(spec, e, fd) for e in queued(spec))
    finally:
        os.close(fd)  # a started supervisor holds the lock through its own copy


def start_claimed(spec: Mapping[str, Any], entry: str, fd: int) -> bool:
    """Start a claimed app's supervisor with the slot; a failure is recorded as its end."""
    path = app_dir_of(spec, entry)
    try:
        request = store.read_json(path / "app.json")
        proc = launch.start_supervisor(path, str(request["cwd"]), fd)
        launch.record_supervisor(path, proc)
        return True
    except (TrainlaunchError, OSError, KeyError, TypeError, ValueError) as e:
        with contextlib.suppress(TrainlaunchError, OSError):
            write_never_started(path, "FAILED", f"could not start its supervisor: {e}")
        return False
    finally:
        unclaim(spec, entry)


def kick(spec: Mapping[str, Any]) -> None:
    """Start queued apps while slots are free (after a SIGKILL or a reboot nobody handed on)."""
    while not is_closed(spec):
        fd = slots.try_acquire(spec)
        if fd is None:
            return  # every slot is held: each holder hands its slot on when it ends
        if hand_off(spec, fd):
            continue  # one started; another slot may be free
        if not queued(spec):  # an app queued while we held the slot finds it free now
            return


def kick_cached(spec: Mapping[str, Any]) -> bool:
    """kick, at most once a second per group in this process (queries of many queued apps);
    True if it ran now."""
    key = str(spec["dir"]) + "\0kick"
    now = time.monotonic()
    if _seen.get(key, (-CACHE_S, [], 0))[0] + CACHE_S > now:
        return False
    _seen[key] = (now, [], 0)
    kick(spec)
    return True


def cancel_queued(spec: Mapping[str, Any]) -> int:
    """Record every queued app of a closed group as CANCELLED (no process); how many."""
    n = 0
    for entry in queued(spec):
        if claim(spec, entry):
            with contextlib.suppress(TrainlaunchError, OSError):
                write_never_started(app_dir_of(spec, entry), "CANCELLED", GROUP_STOPPED)
                n += 1
            unclaim(spec, entry)
    return n


GROUP_STOPPED = "stopped before it started (its group was stopped)"


def never_started(request: Mapping[str, Any], state: str, msg: str) -> dict[str, Any]:
    """The final record of an app that ends before its supervisor started a replica."""
    now = time.time()
    return {
        "version": store.RECORD_VERSION,
        "state": state,
        "msg": msg,
        "name": (request.get("app") or {}).get("name"),
        "created": request.get("created"),
        "attempts": [],
        "started": None,
        "ended": now,
        "replicas": [
            {"role": r["role"], "replica_id": r["replica_id"], "state": "CANCELLED"}
            for r in request.get("replicas") or []
        ],
    }


def write_never_started(path: Path, state: str, msg: str) -> None:
    """Record an app that never ran as ended (CANCELLED or FAILED), its reserve released."""
    request = store.read_json(path / "app.json")
    store.write_final_json(path / "state.json", never_started(request, state, msg))
    store.release_reserve(path)


def position(spec: Mapping[str, Any], entry: str) -> tuple[int, int, int]:
    """(place in line from 1, apps queued, slots held) from a listing at most a second old."""
    key = str(spec["dir"])
    now = time.monotonic()
    when, names, held = _seen.get(key, (-CACHE_S, [], 0))
    if when + CACHE_S <= now:
        names, held = queued(spec), slots.busy(spec)
        _seen[key] = (now, names, held)
    return bisect.bisect_left(names, entry) + 1, len(names), held


def queued_record(path: Path, request: Mapping[str, Any]) -> dict[str, Any] | None:
    """A record for an app still in line or being handed a slot; None once it has a supervisor
    (or a final record): the caller reads those."""
    spec = request.get("slots") or {}
    entry = spec.get("entry")
    if not isinstance(entry, str) or (path / "supervisor.json").exists():
        return None
    d = group_dir(spec)
    group = d.name
    if (d / CLOSED).exists():  # in line, or taken by whoever cancels it (or starts it: the
        return never_started(request, "CANCELLED", GROUP_STOPPED)  # supervisor cancels it)
    if (d / QUEUE / entry).exists():
        place, _, held = position(spec, entry)
        return {"state": "PENDING", "msg": waiting_msg(group, place, held, spec["count"])}
    try:
        claimed_at = (d / CLAIMED / entry).stat().st_ctime  # the rename's time
    except FileNotFoundError:
        return None  # started or ended meanwhile: the records say which
    if time.time() - claimed_at > CLAIM_TIMEOUT_S:
        return None  # whoever claimed it died before starting it: "never started"
    return {"state": "PENDING", "msg": f"handed a slot of group {group}: starting", "replicas": []}


def waiting_msg(group: str, place: int, held: int, count: int) -> str:
    """What a queued app's status says."""
    return (
        f"queued: {_ordinal(place)} in line for a slot of group {group} ({held} of {count} running)"
    )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


__all__ = [
    "GROUP_STOPPED",
    "STOP_REQUEST",
    "cancel_queued",
    "claim",
    "close",
    "enqueue",
    "hand_off",
    "in_line",
    "is_closed",
    "kick",
    "kick_cached",
    "never_started",
    "queued",
    "queued_record",
    "unclaim",
    "waiting_msg",
    "write_never_started",
]
