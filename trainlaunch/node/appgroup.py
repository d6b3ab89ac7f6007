"""Every process of an app, also those that left its process groups (``setsid``, daemons).

Stopping a replica's process group misses what it started in a session of its own. Two ways
to find those, one used wherever the machine allows it, the other otherwise:

* **cgroup** (cgroup v2, where this user may create one: root, or a delegated subtree): the
  supervisor makes ``trainlaunch-<app id>`` under its own cgroup and moves itself into it
  before it starts a replica, so that everything the app starts is a member, whatever it
  does to its session, process group or environment. Its path is in ``state.json``. (The
  warm supervisor of a `run` makes ``trainlaunch-supervisor-<pid>-<start ticks>`` while it
  waits for its app: schedulers/local/launch.py.)
* **environment**: a live process of this user whose environment carries the app's
  ``TRAINLAUNCH_APP_ID`` (every replica inherits it; one that clears its environment and
  leaves its group is not found: docs/reliability.md).

:func:`stray` lists what is left of an app once its replicas are gone (at its end, before a
requeue, at ``stop``), and :func:`stop_strays` stops them (SIGTERM, grace, SIGKILL), by the
same rule whether the supervisor lives or died. Torch-free; Linux only (elsewhere nothing
is found).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable

from trainlaunch import settings
from trainlaunch.node import processes

CGROUP = "cgroup"
ENVIRONMENT = "environment"
FOUND_BY = {CGROUP: "its cgroup", ENVIRONMENT: f"its {settings.APP_ID}"}
PREFIX = "trainlaunch-"


def _cgroup2_mount() -> str | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or .../unified on a hybrid)."""
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if "-" in fields and fields[fields.index("-") + 1] == "cgroup2":
                    return fields[4]
    except OSError:
        pass
    return None


def _own_cgroup(mount: str) -> str | None:
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return os.path.join(mount, line[3:].strip().lstrip("/"))
    except OSError:
        pass
    return None


def _path(name: str) -> str | None:
    """Where this process's cgroup ``PREFIX + name`` goes: under its own (None: no cgroup v2)."""
    mount = _cgroup2_mount()
    if mount is None:
        return None
    return os.path.join(_own_cgroup(mount) or mount, PREFIX + name)


def supervisor_name(pid: int) -> str:
    """The cgroup name (after PREFIX) of a warm supervisor, made before its app exists
    (schedulers/local/launch.py): its pid and start time, never another process's."""
    return f"supervisor-{pid}-{processes.start_ticks(pid)}"


def enter(app_id: str) -> str | None:
    """Make the app's cgroup (app_id: its name after PREFIX) and move this process (the
    supervisor) into it; its path, or None where this user may not (no cgroup v2, no
    delegation): the environment is used."""
    path = _path(app_id)
    if path is None:
        return None
    try:
        os.mkdir(path)
    except FileExistsError:
        pass  # a requeued supervisor's own, or one a killed supervisor left
    except OSError:
        return None
    try:
        _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))
    except OSError:
        with contextlib.suppress(OSError):
            os.rmdir(path)
        return None
    return path


def leave(path: str | None) -> None:
    """Move this process back to the parent cgroup and remove the app's (once empty)."""
    if not path:
        return
    parent = os.path.dirname(os.path.normpath(path))
    with contextlib.suppress(OSError):
        _write(os.path.join(parent, "cgroup.procs"), str(os.getpid()))
    remove(path)
    remove(parent)  # an app started from another app's replica nests in that one's cgroup


def remove(path: str | None) -> None:
    """Remove an app's cgroup if it is empty (best effort)."""
    if path and _ours(path):
        with contextlib.suppress(OSError):
            os.rmdir(path)


def remove_named(name: str) -> None:
    """Remove this process's cgroup ``PREFIX + name`` if it is there and empty (a warm
    supervisor's that was stopped: its starter clears up after it)."""
    remove(_path(name))


def stray(app_id: str, cgroup: str | None, keep: Iterable[int] = ()) -> tuple[list[int], str]:
    """The app's live processes of this user other than keep (and this one), and how they
    were found: the members of its cgroup where it has one, else those whose environment
    names the app."""
    skip = {os.getpid(), *keep}
    if cgroup and _ours(cgroup) and os.path.isdir(cgroup):
        try:
            with open(os.path.join(cgroup, "cgroup.procs")) as f:
                pids = [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            pids = None
        if pids is not None:
            uid = os.getuid()
            return [p for p in pids if p not in skip and _owned(p, uid)], CGROUP
    return [p for p in processes_with_app_id(app_id) if p not in skip], ENVIRONMENT


def stop_strays(pids: list[int], grace: float) -> int:
    """SIGTERM each, wait up to grace, SIGKILL the rest; how many there were."""
    if not pids:
        return 0
    ticks = {p: processes.start_ticks(p) for p in pids}

    def send(pid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)

    live = [p for p, t in ticks.items() if t is not None]
    processes.stop_with_grace(
        live,
        grace,
        sig=signal.SIGTERM,
        send=send,
        alive=lambda p: processes.same_process_alive(p, ticks[p]),
        kill_wait=5.0,
    )
    return len(live)


def processes_with_app_id(app_id: str) -> list[int]:
    """Live processes of this user whose environment says they belong to app_id."""
    needle = f"{settings.APP_ID}={app_id}".encode()
    me, uid, found = os.getpid(), os.getuid(), []
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env and processes.alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def left_groups(pids: Iterable[int], groups: Iterable[int]) -> int:
    """How many of pids are in none of the app's process groups (its replicas', its node
    agents' workers'): those left them, as a `setsid` daemon does. A replica's child still
    dying of its group's signal when the app's processes are looked for is not one."""
    inside = set(groups)
    left = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            left += os.getpgid(pid) not in inside
    return left


def said(count: int, found_by: str) -> str:
    """``also stopped 1 process that left the app's process group (found by its cgroup)``"""
    what = "process that" if count == 1 else "processes that"
    return (
        f"also stopped {count} {what} left the app's process group "
        f"(found by {FOUND_BY.get(found_by, found_by)})"
    )


def _ours(path: str) -> bool:
    """A path this module made: an app's cgroup, never another directory."""
    return os.path.basename(os.path.normpath(path)).startswith(PREFIX) and "/../" not in path


def _owned(pid: int, uid: int) -> bool:
    try:
        return os.stat(f"/proc/{pid}").st_uid == uid and processes.alive(pid)
    except OSError:
        return False


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
