"""Truthful status of a local app from its records, and stopping it with or without a supervisor.

The supervisor writes ``state.json``; this module never trusts a non-terminal record on its
own: it checks that the recorded supervisor is still the same live process (pid + start time
+ boot id), so a killed supervisor or a rebooted machine never shows as a stale RUNNING.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from trainlaunch import store
from trainlaunch.diagnosis.values import Diagnosis
from trainlaunch.errors import SchedulerError, StoreError, UsageError
from trainlaunch.node import appgroup, processes
from trainlaunch.node.agent_record import worker_groups
from trainlaunch.schedulers.local import queue
from trainlaunch.specs import AppState, AppStatus, Attempt, ReplicaStatus, RoleStatus

NEVER_STARTED_AFTER_S = 30.0  # a supervisor that has not shown up by then never will
STOP_EXTRA_S = 10.0  # on top of the grace period, how long stop waits for the supervisor


def _state(d: Mapping[str, Any] | None, key: str = "state") -> AppState:
    try:
        return AppState[(d or {})[key]]
    except (KeyError, TypeError):
        return AppState.UNKNOWN


def status_from_record(request: Mapping[str, Any], state: Mapping[str, Any] | None) -> AppStatus:
    """Build an AppStatus from the request and the supervisor's last record."""
    by_key = {(r["role"], r["replica_id"]): r for r in (state or {}).get("replicas", [])}
    roles: dict[str, list[ReplicaStatus]] = {}
    agent_restarts = 0
    app_state = _state(state) if state else AppState.SUBMITTED
    for plan in request.get("replicas", []):
        rec = by_key.get((plan["role"], plan["replica_id"]), {})
        # a dist.ddp node agent restarts its worker group itself (torchrun's --max-restarts)
        agent = _agent_restarts(request, plan)
        agent_restarts = max(agent_restarts, agent)
        roles.setdefault(plan["role"], []).append(
            ReplicaStatus(
                id=plan["replica_id"],
                role=plan["role"],
                state=_state(rec) if rec else (AppState.PENDING if state else AppState.SUBMITTED),
                hostname=_str(rec.get("hostname")),
                exit_code=_int(rec.get("exit_code")),
                signal=_str(rec.get("signal")) or None,
                restarts=(_int(rec.get("restarts")) or 0) + agent,
                message=_str(rec.get("message")),
                pid=_int(rec.get("pid")),
            )
        )
    app_dir = request.get("app_dir", "")
    return AppStatus(
        state=app_state,
        num_restarts=(_int((state or {}).get("num_restarts")) or 0) + agent_restarts,
        msg=_str((state or {}).get("msg")),
        structured_error_msg=_str((state or {}).get("structured_error_msg")),
        ui_url=f"file://{app_dir}" if app_dir else None,
        roles=tuple(RoleStatus(name, tuple(reps)) for name, reps in roles.items()),
        exit_code=_int((state or {}).get("exit_code")),
        num_requeues=_int((state or {}).get("num_requeues")) or 0,
        attempts=_attempts((state or {}).get("attempts")),
    )


def app_failure(path: Path, status: AppStatus) -> Diagnosis | None:
    """Why the app failed or was stopped, as its supervisor recorded it (docs/failures.md)."""
    if status.state not in (AppState.FAILED, AppState.CANCELLED):
        return None
    try:
        record = store.read_json_or_none(path / "state.json")
    except (StoreError, OSError):
        return None
    return Diagnosis.from_dict((record or {}).get("failure")) if isinstance(record, dict) else None


def _attempts(value: Any) -> tuple[Attempt, ...]:
    """The attempt history of a record (a damaged one reads as none)."""
    items = value if isinstance(value, list) else []
    return tuple(Attempt.from_dict(a) for a in items if isinstance(a, dict))


def _int(value: Any) -> int | None:
    """An int field of a record (a damaged record's odd value reads as unknown)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str:
    """A text field of a record ('' when missing or damaged)."""
    return value if isinstance(value, str) else ""


def _agent_restarts(request: Mapping[str, Any], plan: Mapping[str, Any]) -> int:
    """Worker-group restarts a node agent recorded in its agent.json (0 if none)."""
    if not request.get("app_dir") or plan.get("node_agent") is not True:
        return 0
    rec = store.read_json_or_none(Path(request["app_dir"]) / plan["log_dir"] / "agent.json")
    restarts = rec.get("restarts") if isinstance(rec, dict) else 0
    return restarts if isinstance(restarts, int) and restarts > 0 else 0


def supervisor_record(path: Path, state: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Who owns the app: the supervisor's own record, else what the CLI recorded at launch."""
    if state and state.get("supervisor"):
        return dict(state["supervisor"])
    return store.read_json_or_none(path / "supervisor.json")


def live_replica_pids(state: Mapping[str, Any] | None, boot: str | None) -> list[int]:
    """Pids of recorded replica processes that are still the same live processes."""
    out = []
    for r in (state or {}).get("replicas", []):
        if (
            r.get("pid")
            and not _state(r).is_terminal
            and processes.same_process_alive(r["pid"], r.get("ticks"), boot)
        ):
            out.append(int(r["pid"]))
    return out


def processes_of_app(app_id: str, state: Mapping[str, Any] | None) -> list[int]:
    """Live processes of the app (this user's), by the rule its supervisor used: the members
    of its cgroup, else those whose environment carries its TRAINLAUNCH_APP_ID (node/
    appgroup.py). Found even when the supervisor died before it recorded their pids."""
    cgroup = (state or {}).get("cgroup")
    return appgroup.stray(app_id, cgroup if isinstance(cgroup, str) else None)[0]


def derive_status(path: Path, request: Mapping[str, Any]) -> AppStatus:
    """The app's true status (see module docstring); StoreError if a record is malformed."""
    try:
        return _derive_status(path, request)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        raise StoreError(f"unreadable record in {path}: {type(e).__name__}: {e}") from None


def _derive_status(path: Path, request: Mapping[str, Any]) -> AppStatus:
    request = {**request, "app_dir": str(path)}
    state = store.read_json_or_none(path / "state.json")
    if state and _state(state).is_terminal:
        return status_from_record(request, state)
    if state is None and request.get("slots"):  # in its group's queue: no process (queue.py)
        waiting = queue.queued_record(path, request)
        if waiting is not None:
            return status_from_record(request, waiting)
        state = store.read_json_or_none(path / "state.json")  # it started or ended meanwhile
        if state and _state(state).is_terminal:
            return status_from_record(request, state)
    sup = supervisor_record(path, state)
    if sup and processes.same_process_alive(sup.get("pid"), sup.get("ticks"), sup.get("boot_id")):
        return status_from_record(request, state)
    # the supervisor is gone: it may have just written its final record, so read once more
    state = store.read_json_or_none(path / "state.json")
    if state and _state(state).is_terminal:
        return status_from_record(request, state)
    if sup is None:
        # a queued app's supervisor starts when it is handed a slot: count from then
        since = (state or {}).get("started") or request.get("created") or 0
        age = time.time() - float(since)
        if age < NEVER_STARTED_AFTER_S:
            return status_from_record(request, state)
        return _orphaned(
            request, state, "the supervisor never started (see supervisor.log)", AppState.FAILED
        )
    rebooted = bool(sup.get("boot_id")) and sup.get("boot_id") != processes.boot_id()
    live = (
        []
        if rebooted
        else (live_replica_pids(state, sup.get("boot_id")) or processes_of_app(path.name, state))
    )
    who = f"supervisor (pid {sup.get('pid')})"
    if rebooted:
        return _orphaned(
            request,
            state,
            f"{who} is gone: the machine rebooted while the app was running",
            AppState.FAILED,
        )
    if live:
        return _orphaned(
            request,
            state,
            f"{who} died; {len(live)} replica process(es) still "
            "running; `trainlaunch stop` cleans them up",
            AppState.UNKNOWN,
        )
    return _ended_without_supervisor(path, request, state, who)


def _ended_without_supervisor(
    path: Path, request: Mapping[str, Any], state: Mapping[str, Any] | None, who: str
) -> AppStatus:
    """Nothing of the app runs and its supervisor died before recording the end.

    The result is taken from what is on disk (replica records, node agents' agent.json);
    where a replica's end is not recorded anywhere the app is UNKNOWN, ended, with the reason.
    """
    full = _store_full(path)
    outcomes = replica_outcomes(path, request, state)
    if outcomes is None and not _any_started(path, request, state):  # issue 23 #16
        msg = f"{who} died before it started any replica ({full or 'killed?'}); nothing ran"
        return _orphaned(request, state, msg, AppState.FAILED, ended=True)
    if outcomes is None:
        why = "its replicas' exit codes were not recorded"
        msg = f"{who} died before the app finished ({full or 'killed?'}); {why}"
        return _orphaned(request, state, msg, AppState.UNKNOWN, ended=True)
    by_key = {(r["role"], r["replica_id"]): r for r in (state or {}).get("replicas", [])}
    replicas = [
        {**by_key.get(key, {"role": key[0], "replica_id": key[1]}), **outcome}
        for key, outcome in outcomes.items()
    ]
    failed = [r for r in replicas if r["state"] == "FAILED"]
    cancelled = any(r["state"] == "CANCELLED" for r in replicas)
    result = "FAILED" if failed else ("CANCELLED" if cancelled else "SUCCEEDED")
    record = {
        **(state or {}),
        "state": result,
        "exit_code": failed[0].get("exit_code") if failed else None,
        "replicas": replicas,
        "msg": f"{who} died after every replica had ended ({full or 'killed?'}); "
        f"{result} per the replicas' own records",
    }
    return status_from_record(request, record)


def _any_started(path: Path, request: Mapping[str, Any], state: Mapping[str, Any] | None) -> bool:
    """Whether a replica of the app was ever started (a recorded start, pid or agent record)."""
    if any(r.get("started") or r.get("pid") for r in (state or {}).get("replicas", [])):
        return True
    return any((path / r["log_dir"]).exists() for r in request.get("replicas", []))


def replica_outcomes(
    path: Path, request: Mapping[str, Any], state: Mapping[str, Any] | None
) -> dict[tuple[str, int], dict[str, Any]] | None:
    """How every replica ended, from its record or its node agent's agent.json (None: unknown)."""
    by_key = {(r["role"], r["replica_id"]): r for r in (state or {}).get("replicas", [])}
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for plan in request.get("replicas", []):
        key = (plan["role"], plan["replica_id"])
        rec = by_key.get(key, {})
        if _state(rec).is_terminal:
            out[key] = {"state": rec["state"], "exit_code": _int(rec.get("exit_code"))}
            continue
        agent = None
        if plan.get("node_agent") is True:  # the request says so (Role.node_agent)
            agent = store.read_json_or_none(path / plan["log_dir"] / "agent.json")
        started = rec.get("started")
        if (
            not isinstance(agent, dict)
            or agent.get("state") not in ("SUCCEEDED", "FAILED")
            or not isinstance(agent.get("started"), (int, float))
            or (isinstance(started, (int, float)) and agent["started"] < started - 1.0)
        ):
            return None  # nothing (current) on disk says how this replica ended
        out[key] = {
            "state": agent["state"],
            "exit_code": _int(agent.get("exit_code")),
            "message": f"from {plan['log_dir']}/agent.json",
        }
    return out


def _store_full(path: Path) -> str:
    """Why the supervisor may have died, when the store has no space left ('' otherwise)."""
    try:
        vfs = os.statvfs(path)
    except OSError:
        return ""
    return "the app store is full: no space left on device" if vfs.f_bavail == 0 else ""


def _orphaned(
    request: Mapping[str, Any],
    state: Mapping[str, Any] | None,
    msg: str,
    app_state: AppState,
    ended: bool = False,
) -> AppStatus:
    base = status_from_record(request, state)
    # replace(), not a copy field by field: a field added to the values later is kept
    roles = tuple(
        dataclasses.replace(
            rs,
            replicas=tuple(
                r if r.state.is_terminal else dataclasses.replace(r, state=AppState.UNKNOWN)
                for r in rs.replicas
            ),
        )
        for rs in base.roles
    )
    return dataclasses.replace(base, state=app_state, msg=msg, roles=roles, ended=ended)


def _lock(path: Path) -> int:
    try:
        fd = os.open(path / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:  # read-only or full store: a store error, not a crash
        raise StoreError(f"cannot lock {path / '.lock'}: {e.strerror or e}") from None
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def cancel(path: Path, request: Mapping[str, Any], interrupt: bool = False) -> None:
    """Stop the app and return once it is terminal and none of its processes is left.

    interrupt (Ctrl-C): the supervisor gets SIGINT instead of SIGTERM and passes it on to the
    replicas first, their SIGTERM coming after the grace period (supervisor.py: terminate);
    it gets that much longer before it is SIGKILLed."""
    fd = _lock(path)  # two concurrent stops: the second finds the app already terminal
    try:
        status = derive_status(path, request)
        if status.is_terminal or _cancel_queued(path, request):
            return
        grace = float(request.get("grace_period") or 10.0)
        state = store.read_json_or_none(path / "state.json")
        sup = supervisor_record(path, state)
        if sup and processes.same_process_alive(
            sup.get("pid"), sup.get("ticks"), sup.get("boot_id")
        ):

            def stopping(_pid: int) -> bool:  # until the supervisor has exited: one that
                # recorded the end still hands its slot on, and stop promises no process is left
                return processes.same_process_alive(
                    sup.get("pid"), sup.get("ticks"), sup.get("boot_id")
                )

            # a wedged supervisor is SIGKILLed; one that died without recording the end (a full
            # disk?) is taken over below
            term = processes.interrupt_term_wait(grace) if interrupt else 0.0
            processes.stop_with_grace(
                [int(sup["pid"])],
                grace + term + STOP_EXTRA_S,
                sig=signal.SIGINT if interrupt else signal.SIGTERM,
                send=_signal,
                alive=stopping,
            )
            if _state(store.read_json_or_none(path / "state.json")).is_terminal:
                return  # it recorded the end and exited
        strays = kill_replicas(path, store.read_json_or_none(path / "state.json"), grace)
        state = store.read_json_or_none(path / "state.json") or {}
        now = time.time()
        msg = "stopped by `trainlaunch stop` after the supervisor had died"
        state = {
            **state,
            "state": "CANCELLED",
            "ended": now,
            "msg": f"{msg}; {strays}" if strays else msg,
            "replicas": [
                {**r, "state": r.get("state") if _state(r).is_terminal else "CANCELLED"}
                for r in state.get("replicas", [])
            ],
        }
        store.write_final_json(path / "state.json", state)
        store.release_reserve(path)
    finally:
        os.close(fd)


def _cancel_queued(path: Path, request: Mapping[str, Any]) -> bool:
    """Stop an app that has no supervisor yet; True if it ended here (CANCELLED, no process).

    One still in line is taken out of it. One being handed a slot right now gets a stop
    request its supervisor reads before it starts a replica; this waits until that
    supervisor is recorded (or the app ended), and the caller stops it as any other.
    """
    spec = request.get("slots") or {}
    entry = spec.get("entry")
    if not isinstance(entry, str) or (path / "supervisor.json").exists():
        return False
    if queue.claim(spec, entry):
        try:
            queue.write_never_started(path, "CANCELLED", "stopped before it started")
        finally:
            queue.unclaim(spec, entry)
        return True
    (path / queue.STOP_REQUEST).touch(mode=0o600)
    deadline = time.monotonic() + queue.CLAIM_TIMEOUT_S
    while time.monotonic() < deadline and not (path / "supervisor.json").exists():
        if _state(store.read_json_or_none(path / "state.json")).is_terminal:
            return True
        time.sleep(0.02)
    return False


def requeue(path: Path, request: Mapping[str, Any]) -> None:
    """Simulate a preemption: the supervisor stops every replica and starts the app again.

    Returns once the next attempt started or the app ended (no requeues left).
    """
    fd = _lock(path)
    try:
        status = derive_status(path, request)
        if status.is_terminal:
            raise UsageError(f"app {path.name} is {status.state.name}: nothing to requeue")
        state = store.read_json_or_none(path / "state.json")
        sup = supervisor_record(path, state)
        if not (
            sup
            and processes.same_process_alive(sup.get("pid"), sup.get("ticks"), sup.get("boot_id"))
        ):
            raise UsageError(f"app {path.name} has no live supervisor to requeue it")
        before = len((state or {}).get("attempts") or [])
        _signal(int(sup["pid"]), signal.SIGUSR1)
        grace = float(request.get("grace_period") or 10.0)
        deadline = time.monotonic() + grace + STOP_EXTRA_S
        while time.monotonic() < deadline:
            st = store.read_json_or_none(path / "state.json") or {}
            if len(st.get("attempts") or []) > before or _state(st).is_terminal:
                return
            if not processes.same_process_alive(
                sup.get("pid"), sup.get("ticks"), sup.get("boot_id")
            ):
                break  # it died during the requeue: read once more below, then say so
            time.sleep(0.05)
        st = store.read_json_or_none(path / "state.json") or {}
        if len(st.get("attempts") or []) > before or _state(st).is_terminal:
            return
        _requeue_failed(path, request, sup, grace)
    finally:
        os.close(fd)


def _requeue_failed(
    path: Path, request: Mapping[str, Any], sup: Mapping[str, Any], grace: float
) -> NoReturn:
    """The app neither started again nor ended: a SchedulerError saying what it is now (it
    was exit 0 printing UNKNOWN when the supervisor died during the requeue, issue 23 #25)."""
    who = f"supervisor (pid {sup.get('pid')})"
    if processes.same_process_alive(sup.get("pid"), sup.get("ticks"), sup.get("boot_id")):
        raise SchedulerError(
            f"app {path.name} was not requeued: its {who} did not start it again within "
            f"{grace + STOP_EXTRA_S:g}s",
            hint=f"see `trainlaunch status {request.get('handle') or path.name}` and "
            f"{path / 'supervisor.log'}",
        )
    status = derive_status(path, request)
    raise SchedulerError(
        f"app {path.name} was not requeued: its {who} died during the requeue; "
        f"the app is {status.state.name}" + (f" ({status.msg})" if status.msg else ""),
        hint=f"`trainlaunch stop {request.get('handle') or path.name}` stops what is left; "
        f"`trainlaunch rerun` runs it again",
    )


def app_process_groups(path: Path, state: Mapping[str, Any] | None) -> list[int]:
    """Process groups of the replicas and of node-agent workers (agent.json), still alive."""
    groups: list[int] = []
    for r in (state or {}).get("replicas", []):
        if r.get("pid") and processes.same_process_alive(r["pid"], r.get("ticks")):
            groups.append(int(r.get("pgid") or r["pid"]))
    return groups + worker_groups(path, live=True)


def kill_replicas(path: Path, state: Mapping[str, Any] | None, grace: float) -> str:
    """SIGTERM every process group of the app, and every process of it that left them (its
    cgroup, else its environment: node/appgroup.py), wait up to grace, then SIGKILL the rest;
    what it says of those that had left ('' if none)."""
    groups = app_process_groups(path, state)
    cgroup = (state or {}).get("cgroup")
    cgroup = cgroup if isinstance(cgroup, str) else None
    pids, how = appgroup.stray(path.name, cgroup)
    strays = appgroup.left_groups(pids, groups)
    for pid in pids:  # also what the records missed
        with contextlib.suppress(OSError):
            groups.append(os.getpgid(pid))
    processes.stop_with_grace(sorted(set(groups) - {os.getpgrp()}), grace)
    appgroup.stop_strays(appgroup.stray(path.name, cgroup)[0], 0)  # none may be left
    appgroup.remove(cgroup)
    return appgroup.said(strays, how) if strays else ""


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)
