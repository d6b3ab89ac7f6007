"""The local backend: plan the processes, hand them to a detached supervisor, read the store.

``schedule`` writes the request into the app store and starts
``python -m trainlaunch.schedulers.local.supervisor <app_dir>`` in its own session; the supervisor
owns the app from then on. Every query (status, logs, list, stop) reads the store, so it
works from any later shell. See supervisor.py for the process side.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainlaunch import settings, store
from trainlaunch.errors import AppNotFound, SchedulerError, StoreError, UsageError
from trainlaunch.handles import check_app_id, make_app_handle
from trainlaunch.node.agent_record import preflight_record, waiting_record
from trainlaunch.node.processes import reserve_port
from trainlaunch.options import NO_WATCHDOG, above, at_least, current_dir, existing_dir
from trainlaunch.preflight import options as preflight_options
from trainlaunch.schedulers.api import (
    Capabilities,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    check_params,
    hang_fields,
)
from trainlaunch.schedulers.local import queue as local_queue
from trainlaunch.schedulers.local import slots as local_slots
from trainlaunch.schedulers.local import state as local_state
from trainlaunch.schedulers.local.launch import (
    WarmSupervisor,
    record_supervisor,
    start_supervisor,
    take_prefetched,
    warm_supervisor,
)
from trainlaunch.schedulers.logfiles import follow_lines, read_lines, replica_files, time_span
from trainlaunch.specs import (
    PROGRAM,
    AppDef,
    AppDryRunInfo,
    AppState,
    AppStatus,
    CfgVal,
    ReplicaPlan,
    Role,
    SlotGroup,
    check_name,
    macros,
    runopts,
)
from trainlaunch.stacks import ON_HANG

if TYPE_CHECKING:  # annotations only: stacks is imported where stacks are read
    from trainlaunch.stacks.values import RankStack

BACKEND = "local"
DEFAULT_MAX_REQUEUES = 3
MAX_LOCAL_REPLICAS = 1024  # replicas are processes of this one machine
SNAPSHOT_PLAN_REUSE_S = 2.0  # dry runs closer than this share a snapshot's file list


CAPABILITIES = Capabilities(
    logs=True, stacks=True, requeue=True, slot_groups=True, snapshots=True, hang_watchdog=True
)
# create_scheduler's params (the runner passes each backend only its own)
SCHEDULER_PARAMS = frozenset({"environ"})  # environ: the environment to read instead of os.environ


def create_scheduler(session_name: str, **params: Any) -> LocalScheduler:
    """Registry entry point; an unknown param is a UsageError."""
    check_params(BACKEND, params, SCHEDULER_PARAMS)
    return LocalScheduler(session_name, **params)


def check_program(role: Role, cwd: str) -> None:
    """The program a role declares (specs.PROGRAM) must exist here: fail now, not in a replica."""
    program = role.metadata.get(PROGRAM) or {}
    if "path" in program:
        path = Path(cwd, os.path.expanduser(str(program["path"])))  # an absolute path stays
        if not path.is_file():
            raise UsageError(
                f"no file {program['path']!r} to run in role {role.name!r} (looked for {path})",
                hint="a relative path is relative to the replicas' working directory: the "
                "current one, or --cfg cwd=DIR",
            )
    elif "command" in program:
        import shutil  # (~2 ms) for which(): submission only, and only a command needs it

        if shutil.which(str(program["command"])) is None:
            raise UsageError(
                f"no command {program['command']!r} on PATH to run in role {role.name!r}",
                hint="give its path (./prog), or install it",
            )


class LocalScheduler(Scheduler):
    """Runs every replica as a local process group owned by a detached supervisor."""

    backend = BACKEND
    max_replicas = MAX_LOCAL_REPLICAS
    capabilities = CAPABILITIES

    def __init__(self, session_name: str, **params: Any) -> None:
        super().__init__(session_name)
        self.environ: Mapping[str, str] = params.get("environ") or os.environ
        self._snap_plans: dict[tuple[str, str], tuple[float, Any]] = {}
        self._apps: Path | None = None  # the store's apps directory, once it exists
        self._last_request: tuple[str, dict[str, Any]] = ("", {})
        self._warm: WarmSupervisor | None = None  # warm_up's, until schedule() uses it

    def warm_up(self) -> None:
        """Start the next app's supervisor now (launch.py: its start overlaps the caller's
        dryrun); schedule() hands it the app, close() stops it if none came."""
        if self._warm is None:
            self._warm = take_prefetched() or warm_supervisor()

    def close(self) -> None:
        """Stop a warm supervisor no app was given to (warm_up)."""
        warm, self._warm = self._warm, None
        if warm is not None:
            warm.discard()

    def run_opts(self) -> runopts:
        """Options of the local backend."""
        opts = runopts()
        opts.add(
            "cwd",
            str,
            "working directory of every replica (default: the current one)",
            check=existing_dir,
        )
        opts.add(
            "grace_period",
            float,
            "seconds between SIGTERM and SIGKILL on stop",
            default=10.0,
            check=at_least(0),
        )
        opts.add(
            "snapshot",
            str,
            "copy the code into the app's directory and run it from there: on, off, or an "
            "earlier snapshot's directory (rerun); see docs/preemption.md",
            default="off",
        )
        opts.add(
            "snapshot_store_mib",
            int,
            "the most the store's code snapshots may hold in all, in MiB (a file is kept once "
            "however many snapshots hold it; a snapshot past this is refused)",
            default=2048,
            check=at_least(1),
        )
        opts.add(
            "max_requeues",
            int,
            "how often the app runs again after `stop --requeue` or a rank's exit 75 "
            "(apart from max_retries)",
            default=DEFAULT_MAX_REQUEUES,
            check=at_least(0),
        )
        opts.add(
            "auto_set_cuda_visible_devices",
            bool,
            "give each replica its own CUDA_VISIBLE_DEVICES slice when roles ask for GPUs",
            default=True,
        )
        opts.add(
            "gpu_count",
            int,
            "number of visible GPUs (default: CUDA_VISIBLE_DEVICES, $TRAINLAUNCH_GPU_COUNT or "
            "nvidia-smi -L)",
            check=at_least(0),
        )
        opts.add(
            "hang_timeout",
            float,
            "seconds without output, metrics or heartbeat from any rank that count as a hang "
            "(default: off; docs/hangs.md)",
            check=above(0, NO_WATCHDOG),
        )
        opts.add(
            "on_hang",
            str,
            "after a hang: none (report), stop, restart",
            default="none",
            choices=ON_HANG,
        )
        preflight_options.add_runopts(opts)
        return opts

    def default_metrics_path(self, cfg: Mapping[str, CfgVal]) -> str | None:
        """Metrics go into the app's own directory in the store."""
        # the trailing slash makes it a directory: each rank writes rank{rank}.jsonl in it
        return str(store.store_root(self.environ) / "apps" / macros.app_id / "metrics") + "/"

    # -- submission --------------------------------------------------------------------------

    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo:
        """Plan every replica's command, env and directories (no side effects but a port probe)."""
        from trainlaunch.schedulers import snapshot  # submission only: status/list/logs skip it

        app_id = store.new_app_id(app.name)
        cwd = os.path.abspath(str(cfg.get("cwd") or current_dir()))
        snap = self._snapshot_plan(cfg.get("snapshot"), cwd)
        snap_dir = str(store.store_root(self.environ) / "apps" / app_id / snapshot.SNAPSHOT_DIR)
        strategy = (app.metadata.get("trainlaunch") or {}).get("export_strategy")
        if strategy:  # the ranks import it here, on this machine: refuse a missing one now
            env_paths = [self.environ.get("PYTHONPATH", "")]
            env_paths += [r.env.get("PYTHONPATH", "") for r in app.roles]
            paths = [p for text in env_paths for p in text.split(os.pathsep)]
            settings.check_strategy_module(str(strategy), [cwd, *paths])
        # the replicas run the snapshot's copy: look there (a rerun from another directory)
        code = os.path.join(snap.source, snap.cwd_rel) if snap is not None else cwd
        for role in app.roles:
            check_program(role, code)
        gpu_slices = self._gpu_slices(app, cfg)
        port = str(reserve_port())  # parked: no other job takes it before rank 0 binds it
        replicas = []
        for role in app.roles:
            for i in range(role.num_replicas):
                values = macros.Values(
                    img_root=role.image,
                    app_id=app_id,
                    replica_id=str(i),
                    rank0_env=settings.RANK0_HOST,
                )
                r = values.apply(role)
                log_dir = f"logs/{role.name}/{i}"
                env = dict(r.env)
                env.setdefault(settings.RANK0_HOST, "localhost")
                env.setdefault(settings.RDZV_PORT, port)
                env[settings.REPLICA_ID] = str(i)
                env[settings.NUM_REPLICAS] = str(role.num_replicas)
                env[settings.ROLE_NAME] = role.name
                env[settings.APP_ID] = app_id
                replica_dir = store.store_root(self.environ) / "apps" / app_id / log_dir
                env[settings.REPLICA_LOG_DIR] = str(replica_dir)
                env[settings.HEARTBEAT_PATH] = str(
                    store.store_root(self.environ) / "apps" / app_id / "heartbeat" / "rank{rank}"
                )
                env.setdefault("TORCHELASTIC_ERROR_FILE", str(replica_dir / "error.json"))
                if cfg.get("hang_timeout") and role.node_agent:  # hangs name the collective
                    env.setdefault(settings.FLIGHT_RECORDER, "1")
                env[settings.HANDLE] = make_app_handle(BACKEND, self.session_name, app_id)
                slice_ = gpu_slices.get((role.name, i))
                if slice_ is not None:
                    env["CUDA_VISIBLE_DEVICES"] = slice_
                cmd: tuple[str, ...] = (r.entrypoint, *r.args)
                replica_cwd = cwd
                if snap is not None:
                    replica_cwd, cmd, env = snapshot.relocate(snap, snap_dir, cmd, env, os.environ)
                replicas.append(
                    ReplicaPlan(
                        role=role.name,
                        replica_id=i,
                        cmd=tuple(cmd),
                        env=env,
                        cwd=replica_cwd,
                        log_dir=log_dir,
                        node_agent=role.node_agent,
                    )
                )
        request = {
            "version": store.RECORD_VERSION,
            "app_id": app_id,
            "session": self.session_name,
            "handle": make_app_handle(BACKEND, self.session_name, app_id),
            "app": app.to_dict(),
            "cfg": dict(cfg),
            "cwd": cwd,
            "grace_period": float(cfg.get("grace_period") or 10.0),  # type: ignore[arg-type]
            "max_requeues": int(cfg.get("max_requeues") or 0),  # type: ignore[arg-type]
            "replicas": [p.to_dict() for p in replicas],
        }
        if snap is not None:
            request["snapshot"] = {**snap.to_dict(), "path": snap_dir, "file_list": snap.files}
        group = SlotGroup.of(app)
        if group is not None:  # at most group.size of its apps run at once (slots.py)
            slots_dir = store.store_root(self.environ) / "slots" / group.name
            request["slots"] = local_slots.slot_spec(slots_dir, group.size)
        return AppDryRunInfo(
            request=request,
            fmt=format_request,
            app=app,
            cfg=dict(cfg),
            scheduler=BACKEND,
            app_id=app_id,
            replicas=tuple(replicas),
            drawn={"app_id": app_id, "port": port},
        )

    def _snapshot_plan(self, option: CfgVal | None, cwd: str) -> Any:
        """snapshot.from_option, shared by the dry runs of one batch (a sweep's points): a git
        tree's file list costs four git commands, 10,000 points 100 s. The list is planned
        again once SNAPSHOT_PLAN_REUSE_S pass without a dry run; the files are copied at
        submission, each time."""
        from trainlaunch.schedulers import snapshot

        key = (str(option), cwd)
        now = time.monotonic()
        last = self._snap_plans.get(key)
        if last is None or now - last[0] > SNAPSHOT_PLAN_REUSE_S:
            last = (now, snapshot.from_option(option, cwd, [store.store_root(self.environ)]))
        self._snap_plans = {key: (now, last[1])}
        return last[1]

    def _gpu_slices(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> dict[tuple[str, int], str]:
        wanted = [
            (r.name, i, r.resource.gpu)
            for r in app.roles
            if r.resource.gpu > 0
            for i in range(r.num_replicas)
        ]
        if not wanted or cfg.get("auto_set_cuda_visible_devices") is False:
            return {}
        from trainlaunch.node.devices import visible_gpus  # runs nvidia-smi: submission only

        count = cfg.get("gpu_count")
        gpus = visible_gpus(self.environ, None if count is None else int(count))  # type: ignore[arg-type]
        if not gpus:
            return {}
        need = sum(g for _, _, g in wanted)
        if need > len(gpus):
            raise SchedulerError(
                f"the app asks for {need} GPUs in total but {len(gpus)} are visible",
                hint="lower --gpu/--nproc, or set cfg auto_set_cuda_visible_devices=false",
            )
        slices, nxt = {}, 0
        for role, i, g in wanted:
            slices[(role, i)] = ",".join(gpus[nxt : nxt + g])
            nxt += g
        return slices

    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        """Write the request and start the detached supervisor; return at once."""
        from trainlaunch.schedulers import snapshot  # submission only: status/list/logs skip it

        request = dict(dryrun_info.request)
        app_id = request["app_id"]
        spec = request.get("slots")
        if spec:  # its place in the group's queue (queue.py)
            spec = request["slots"] = {**spec, "entry": local_queue.new_entry(app_id)}
        path = store.create_app_dir(app_id, self.environ)
        try:  # until the supervisor runs (or the app is queued), a failure leaves nothing behind
            request["created"] = time.time()
            if request.get("snapshot"):
                snap = dict(request["snapshot"])
                files = tuple(snap.pop("file_list", ()))
                snapshot.take(  # shared by content: a sweep's points hold one copy
                    snapshot.SnapshotPlan.from_dict(snap, files),
                    Path(snap["path"]),
                    store.store_root(self.environ) / "snapshots",
                    int(request["cfg"].get("snapshot_store_mib") or snapshot.STORE_LIMIT_MIB),
                )
                request["snapshot"] = snap
            store.write_json(path / "app.json", request)
            store.reserve(path, store.reserve_bytes(len(request["replicas"])))
            if spec:
                if local_queue.is_closed(spec):  # a stopped group starts nothing more
                    local_queue.write_never_started(path, "CANCELLED", local_queue.GROUP_STOPPED)
                    return app_id
                local_queue.enqueue(spec, spec["entry"])
        except BaseException:
            store.remove_app_dir(path)
            raise
        if spec:  # queued: it starts now if a slot is free (the oldest in line first)
            local_queue.kick(spec)
            return app_id
        warm, self._warm = self._warm, None
        try:
            proc = start_supervisor(path, request["cwd"], warm=warm)
        except BaseException:
            store.remove_app_dir(path)
            raise
        record_supervisor(path, proc)
        return app_id

    # -- queries -----------------------------------------------------------------------------

    def _dir(self, app_id: str) -> Path:
        if self._apps is None:  # checked once (private, ours): it does not move
            self._apps = store.existing_apps_dir(self.environ)
        base = self._apps or store.store_root(self.environ) / "apps"
        path = base / check_app_id(app_id)
        if not (path / "app.json").exists():
            raise AppNotFound(
                f"no local app {app_id!r} in {path.parent}",
                hint=f"`trainlaunch list` shows this store's apps; an app started with another "
                f"{settings.HOME} is in that store: set {settings.HOME} as it was then",
            )
        return path

    def describe(self, app_id: str) -> DescribeAppResponse:
        """Read the records and derive the truthful state."""
        path = self._dir(app_id)
        request = self._request(path)
        status = local_state.derive_status(path, request)
        if self._kick(request, status):  # its turn may have come: read it again
            status = local_state.derive_status(path, request)
        if request.get("slots") and status.state == AppState.PENDING:
            return self._submitted(app_id, path, request, status)  # nothing of it ran yet
        from trainlaunch.schedulers.local import hangs as local_hangs  # queries only: not `run`

        status = local_hangs.with_stall(path, request, status)
        agents = [
            str(path / r["log_dir"]) for r in request.get("replicas") or [] if r.get("node_agent")
        ]
        asked = agents and (request.get("cfg") or {}).get("preflight")
        return dataclasses.replace(
            self._submitted(app_id, path, request, status),
            **hang_fields(local_hangs.hang_metadata(path, request, status)),
            preflight=preflight_record(agents[:1]) if asked else None,  # docs/preflight.md
            waiting=waiting_record(agents) if status.state == AppState.RUNNING else None,
            failure=local_state.app_failure(path, status),
        )

    def _kick(self, request: Mapping[str, Any], status: Any) -> bool:
        """A queued app's group gets its free slots used (queue.py, at most once a second);
        True if that ran now."""
        spec = request.get("slots")
        if not spec or status.state != AppState.PENDING or "entry" not in spec:
            return False
        return local_queue.kick_cached(spec)

    def _submitted(
        self, app_id: str, path: Path, request: Mapping[str, Any], status: Any
    ) -> DescribeAppResponse:
        """What was submitted, with its status: the whole description of an app waiting for a
        slot (no process checks, hangs or failures to read: `status SWEEP` of 10,000 queued
        points), and the part of every other app's that its records hold."""
        app = None
        with contextlib.suppress(KeyError, TypeError, ValueError, AttributeError, StoreError):
            app = AppDef.from_dict(request["app"])
        return DescribeAppResponse(
            app_id=app_id,
            status=status,
            app=app,
            cfg=request.get("cfg") or {},
            metadata={"app_dir": str(path)},
            log_dir=str(path / "logs"),
            created=request.get("created"),
            cwd=request.get("cwd"),
            settings=(request["app"].get("metadata") or {}).get("trainlaunch") or {},
            snapshot=request.get("snapshot"),
        )

    def describe_queued(self, app_ids: Sequence[str]) -> dict[str, DescribeAppResponse]:
        """The apps of app_ids that wait in a slot group's queue, from one listing per group
        (no record read: `status SWEEP` of 10,000 queued points); the others are left out."""
        found = local_queue.in_line(store.store_root(self.environ) / "slots", set(app_ids))
        out = {}
        for app_id, (group, place, held, count, closed) in found.items():
            if closed:
                status = AppStatus(AppState.CANCELLED, msg=local_queue.GROUP_STOPPED)
            else:
                msg = local_queue.waiting_msg(group, place, held, count)
                status = AppStatus(AppState.PENDING, msg=msg)
            path = store.store_root(self.environ) / "apps" / app_id
            out[app_id] = DescribeAppResponse(
                app_id=app_id, status=status, metadata={"app_dir": str(path)}
            )
        return out

    def _request(self, path: Path) -> dict[str, Any]:
        """read_request, the last one kept: an app.json never changes once written, and the
        runner reads the session of an app right before describing it."""
        if self._last_request[0] != str(path):
            self._last_request = (str(path), read_request(path))
        return self._last_request[1]

    def close_slot_group(self, name: str) -> None:
        """None of the group's queued apps starts any more: they read as CANCELLED."""
        check_name(name, "slot group")  # a path below the store, never outside it
        local_queue.close(store.store_root(self.environ) / "slots" / name)

    def session_of(self, app_id: str) -> str | None:
        """The session recorded in app.json (AppNotFound if there is no such app)."""
        session = self._request(self._dir(app_id)).get("session")
        return session if isinstance(session, str) and session else None

    def list(self) -> list[ListAppResponse]:
        """Every app in the store, newest first; unreadable records are listed as such."""
        rows: builtins.list[ListAppResponse] = []
        base = store.existing_apps_dir(self.environ)
        if base is None:
            return rows  # no store yet: no apps (and a query creates nothing)
        from trainlaunch.schedulers.local import index as app_index  # `list` only

        cached = app_index.load(base)
        fresh: dict[str, app_index.Entry] = {}
        for entry in os.scandir(base):
            if not entry.is_dir() or entry.name.startswith("."):
                continue
            key = app_index.record_key(entry.path)  # before reading: a later change shows next time
            row = app_index.cached_row(cached.get(entry.name), key)
            if row is not None:  # its name was checked as an app id when the row was cached
                fresh[entry.name] = cached[entry.name]
                state, name, created, msg = row
                handle = f"{BACKEND}://{self.session_name}/{entry.name}"
                rows.append(
                    ListAppResponse(entry.name, AppState[state], handle, name, created, msg)
                )
                continue
            path = Path(entry.path)
            handle = make_app_handle(BACKEND, self.session_name, entry.name)
            try:
                request = read_request(path)
                if isinstance(request.get("session"), str) and request["session"]:
                    handle = make_app_handle(BACKEND, request["session"], entry.name)
                status = local_state.derive_status(path, request)
                if self._kick(request, status):
                    status = local_state.derive_status(path, request)
                created = request.get("created")
                if isinstance(created, bool) or not isinstance(created, (int, float)):
                    created = None
                rows.append(
                    ListAppResponse(
                        entry.name,
                        status.state,
                        handle,
                        request["app"]["name"],
                        created,
                        status.msg,
                    )
                )
                if key is not None and status.state.is_terminal and app_index.recorded_final(path):
                    row = [status.state.name, request["app"]["name"], created, status.msg]
                    fresh[entry.name] = {"key": key, "row": row}
            except FileNotFoundError:
                continue  # being created right now
            except (StoreError, KeyError, TypeError) as e:
                rows.append(
                    ListAppResponse(
                        entry.name,
                        AppState.UNKNOWN,
                        handle,
                        "",
                        entry.stat().st_mtime,
                        f"unreadable: {e}",
                    )
                )
        if fresh != cached:
            app_index.save(base, fresh)
        rows.sort(key=lambda r: (r.created or 0, r.app_id), reverse=True)
        return rows

    def cancel(self, app_id: str, interrupt: bool = False) -> None:
        """Stop the app; clean up its processes ourselves if the supervisor is gone.
        interrupt: Ctrl-C's stop, the replicas' SIGINT first (local/state.py: cancel)."""
        path = self._dir(app_id)
        request = read_request(path)
        local_state.cancel(path, request, interrupt)
        if request.get("slots") and "entry" in request["slots"]:  # its slot goes to the next
            local_queue.kick(request["slots"])

    def interrupt(self, app_id: str) -> None:
        """Stop the app as Ctrl-C stops torchrun: the supervisor passes SIGINT on to every
        replica, then SIGTERM after the grace period, then SIGKILL (supervisor.py)."""
        self.cancel(app_id, interrupt=True)

    def stacks(self, app_id: str, native: bool = False) -> builtins.list[RankStack]:
        """py-spy dumps of every rank, taken together (see local/hangs.py)."""
        path = self._dir(app_id)
        from trainlaunch.schedulers.local import hangs as local_hangs

        return local_hangs.dump_app(path, read_request(path), native)

    def requeue(self, app_id: str) -> None:
        """Simulate a preemption: SIGTERM, the grace period, then the app runs again."""
        path = self._dir(app_id)
        local_state.requeue(path, read_request(path))

    def log_replicas(self, app_id: str, role_name: str) -> builtins.list[int]:
        """Replica ids of the role, from the request."""
        request = read_request(self._dir(app_id))
        ids = [r["replica_id"] for r in request["replicas"] if r["role"] == role_name]
        if not ids:
            roles = sorted({r["role"] for r in request["replicas"]})
            raise AppNotFound(f"app {app_id} has no role {role_name!r}; roles: {', '.join(roles)}")
        return ids

    def log_files(
        self, app_id: str, role_name: str, k: int = 0, streams: Stream | None = None
    ) -> builtins.list[Path] | None:
        """The replica's stdout/stderr files (stdout first for combined)."""
        path = self._dir(app_id)
        if k not in self.log_replicas(app_id, role_name):
            raise AppNotFound(f"app {app_id} role {role_name!r} has no replica {k}")
        return replica_files(
            path, ["logs", role_name, str(k)], Stream(streams or Stream.COMBINED).value
        )

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: float | None = None,
        until: float | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterator[str]:
        """Lines of one replica's log files; with should_tail, follow until the app ends."""
        files: builtins.list[Path] = self.log_files(app_id, role_name, k, streams) or []
        spans = [
            time_span(f.parent / "timeline.jsonl", f.name.split(".")[0], since, until)
            for f in files
        ]
        if not should_tail or until is not None:
            yield from read_lines(files, regex, spans)
            return

        def finished() -> bool:
            return self.describe(app_id).status.is_terminal

        yield from follow_lines(files, regex, finished, [s for s, _ in spans])


def read_request(path: Path) -> dict[str, Any]:
    """The app's app.json, checked for the shape every reader relies on (StoreError if not)."""
    request = store.read_json(path / "app.json")
    try:
        ok = (
            isinstance(request, dict)
            and isinstance(request["app"], dict)
            and isinstance(request["app"]["name"], str)
            and all(
                isinstance(r, dict)
                and isinstance(r["role"], str)
                and isinstance(r["replica_id"], int)
                and isinstance(r["log_dir"], str)
                and isinstance(r["cmd"], list)
                and isinstance(r["env"], dict)
                for r in request["replicas"]
            )
            and isinstance(request["app"].get("metadata") or {}, dict)
            and isinstance((request["app"].get("metadata") or {}).get("trainlaunch") or {}, dict)
            and isinstance(request.get("cfg") or {}, dict)
        )
    except (KeyError, TypeError):
        ok = False
    if not ok:
        raise StoreError(f"unreadable record {path / 'app.json'}: not a trainlaunch app request")
    return request


def format_request(request: Mapping[str, Any]) -> str:
    """The exact processes the supervisor will start, one block per replica."""
    import shlex

    from trainlaunch.schedulers import snapshot  # submission only: status/list/logs skip it

    lines = [f"# local app {request['app_id']} ({request['handle']})", f"# cwd: {request['cwd']}"]
    if request.get("snapshot"):
        lines.append(f"# snapshot: {snapshot.summary(request['snapshot'])}")
    for r in request["replicas"]:
        lines.append(f"\n[{r['role']}/{r['replica_id']}]")
        env = r["env"]
        for k in sorted(env):
            lines.append(f"  {k}={shlex.quote(env[k])}")
        lines.append("  $ " + " ".join(shlex.quote(a) for a in r["cmd"]))
    return "\n".join(lines)


__all__ = ["LocalScheduler", "create_scheduler", "format_request"]
