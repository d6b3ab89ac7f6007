"""The Slurm backend: render one sbatch script per app, submit it, query and stop the job.

Rendering is pure (render.py); states and records are parsed in status.py. This
module runs the Slurm commands (all through :func:`run_slurm`) and keeps a small index under
the trainlaunch home, ``slurm/index/<job id>.json`` (job dir, AppDef, options, script), so
that status and logs work from any directory. docs/slurm.md is the user's guide.
"""

from __future__ import annotations

import builtins
import os
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainlaunch import settings, store
from trainlaunch.diagnosis.values import Diagnosis
from trainlaunch.errors import (
    AppNotFound,
    SchedulerError,
    SchedulerUnavailable,
    StoreError,
    TrainlaunchError,
    UsageError,
)
from trainlaunch.handles import check_app_id, make_app_handle
from trainlaunch.node.agent_record import preflight_record, waiting_record
from trainlaunch.node.processes import current_umask
from trainlaunch.options import current_dir
from trainlaunch.schedulers import snapshot
from trainlaunch.schedulers.api import (
    Capabilities,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    check_params,
    hang_fields,
)
from trainlaunch.schedulers.logfiles import follow_lines, read_lines, replica_files
from trainlaunch.schedulers.slurm import failure as slurm_failure
from trainlaunch.schedulers.slurm import interrupt as slurm_interrupt
from trainlaunch.schedulers.slurm import jobdir
from trainlaunch.schedulers.slurm import stacks as slurm_stacks
from trainlaunch.schedulers.slurm import status as slurm_status
from trainlaunch.schedulers.slurm.array import array_mismatch, array_too_big, render_array
from trainlaunch.schedulers.slurm.attempts import with_history
from trainlaunch.schedulers.slurm.render import (
    BACKEND,
    BATCH_LOG,
    default_job_dir,
    render_parts,
    slurm_runopts,
)
from trainlaunch.schedulers.slurm.status import JobInfo
from trainlaunch.schedulers.snapshot import SnapshotPlan
from trainlaunch.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    AppStatus,
    CfgVal,
    Role,
    macros,
    runopts,
)
from trainlaunch.stacks.values import RankStack
from trainlaunch.values import frozen

COMMAND_TIMEOUT_S = 60.0
SACCT_TIMEOUT_S = 20.0  # a slow accounting database must not block status for long
CANCEL_TIMEOUT_S = 60.0  # scancel -> terminal state (Slurm's KillWait is 30 s by default)
NO_ACCOUNTING = "accounting storage is disabled"


# create_scheduler's params (the runner passes each backend only its own)
CAPABILITIES = Capabilities(
    logs=True, stacks=True, requeue=True, arrays=True, snapshots=True, hang_watchdog=True
)
SCHEDULER_PARAMS = frozenset({"environ"})  # environ: the environment to read instead of os.environ


def create_scheduler(session_name: str, **params: Any) -> SlurmScheduler:
    """Registry entry point; an unknown param is a UsageError."""
    check_params(BACKEND, params, SCHEDULER_PARAMS)
    return SlurmScheduler(session_name, **params)


@frozen
class SlurmBatchRequest:
    """What ``schedule`` submits: the script, and the job dir (``${app_id}`` = the job id)."""

    script: str
    job_dir: str
    snapshot: SnapshotPlan | None = None  # copied into <job dir>/snapshot before release


@frozen
class SlurmArrayRequest:
    """One job array for several apps: the script, and each app's own dry-run (element i)."""

    script: str
    job_dir: str  # ${app_id} is the element's id, ARRAYJOB_i
    elements: tuple[AppDryRunInfo, ...]
    max_parallel: int | None = None


def run_slurm(
    argv: Sequence[str],
    input: str | None = None,
    check: bool = True,
    timeout: float = COMMAND_TIMEOUT_S,
    umask: int = -1,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one Slurm command; failures become a one-line SchedulerError (Slurm's own words)."""
    try:
        proc = subprocess.run(
            list(argv),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            errors="replace",
            umask=umask,
            env={**os.environ, **env} if env else None,
        )
    except FileNotFoundError:
        raise SchedulerUnavailable(
            f"slurm backend unavailable: {argv[0]} not found on PATH",
            hint="install the Slurm client commands (sbatch, squeue, scontrol, scancel) or "
            "run on a login node; scripts/slurm-dev-cluster start makes a local test "
            "cluster",
        ) from None
    except subprocess.TimeoutExpired:
        raise SchedulerError(
            f"{argv[0]} did not answer within {timeout:.0f}s", hint="is slurmctld up? try `sinfo`"
        ) from None
    if check and proc.returncode != 0:
        raise SchedulerError(f"{argv[0]} failed: {failure(proc)}")
    return proc


def failure(proc: subprocess.CompletedProcess[str]) -> str:
    """Why a Slurm command failed, never empty: its last line (stderr, else stdout), else
    its exit status."""
    return last_line(proc.stderr) or last_line(proc.stdout) or f"exit status {proc.returncode}"


def forgotten(proc: subprocess.CompletedProcess[str]) -> bool:
    """A query failed because slurmctld no longer knows the job (sacct may): `Invalid job id`
    on stderr, or, for a purged array element, `Job 1023_0 not found` on stdout."""
    said = f"{proc.stderr}\n{proc.stdout}".lower()
    return "invalid job id" in said or "not found" in said


def last_line(text: str) -> str:
    """The last non-empty line of a command's stderr."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


class SlurmScheduler(Scheduler):
    """Submits apps as sbatch jobs; answers from scontrol, sacct and the job dir."""

    backend = BACKEND
    capabilities = CAPABILITIES

    def __init__(self, session_name: str, **params: Any) -> None:
        super().__init__(session_name)
        self.environ: Mapping[str, str] = params.get("environ") or os.environ
        self._accounting: bool | None = None

    def run_opts(self) -> runopts:
        """The typed options (render.slurm_runopts)."""
        return slurm_runopts()

    def _home(self) -> Path:
        return store.store_root(self.environ)

    def _job_dir_template(self, cfg: Mapping[str, CfgVal]) -> str:
        given = cfg.get("job_dir")
        if not given:
            return default_job_dir(self._home())
        return os.path.abspath(os.path.expanduser(str(given)))

    def default_metrics_path(self, cfg: Mapping[str, CfgVal]) -> str | None:
        """Metrics go into the job dir (``${app_id}`` is the job id)."""
        return self._job_dir_template(cfg) + "/metrics/"  # a directory: rank{rank}.jsonl inside

    # -- submission --------------------------------------------------------------------------

    def _workdir(self, snap: SnapshotPlan | None, job_dir: str) -> tuple[str | None, str]:
        """Where the job runs (its code snapshot's copy of the cwd) and a note saying so."""
        if snap is None:
            return None, ""
        dest = f"{job_dir}/{snapshot.SNAPSHOT_DIR}"
        return snapshot.relocate(snap, dest, (), {}, self.environ)[0], (
            f"code snapshot: {snap.summary()}"
        )

    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo:
        """Render the batch script; str() of the result is exactly what sbatch gets."""
        resolved = self.run_opts().resolve(cfg, BACKEND)
        job_dir = self._job_dir_template(resolved)
        exclude = [self._home(), Path(job_dir.split(macros.app_id)[0])]
        snap = snapshot.from_option(resolved.get("snapshot"), current_dir(), exclude)
        workdir, note = self._workdir(snap, job_dir)
        if snap is not None:
            dest = f"{job_dir}/{snapshot.SNAPSHOT_DIR}"

            def relocated(role: Role) -> Role:
                _, cmd, env = snapshot.relocate(
                    snap, dest, (role.entrypoint, *role.args), role.env, self.environ
                )
                return role.replace(entrypoint=cmd[0], args=cmd[1:], env=env)

            app = app.map_roles(relocated)
        head, body = render_parts(app, resolved, self.session_name, job_dir, workdir, note)
        script = "\n".join(head + body) + "\n"
        return AppDryRunInfo(
            request=SlurmBatchRequest(script, job_dir, snap),
            fmt=_script_of,
            app=app,
            cfg=resolved,
            scheduler=BACKEND,
        )

    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        """Submit held, create the job dir and the record, then release the job."""
        req: SlurmBatchRequest = dryrun_info.request
        jobdir.check_template(req.job_dir)  # a planted parent: refused before anything runs
        job_id = self._submit_held(req.script)
        try:
            self._record_job(job_id, req.job_dir, req.script, dryrun_info, req.snapshot)
        except StoreError as e:  # e.g. a job dir another user planted (jobdir.py)
            run_slurm(["scancel", job_id], check=False)
            raise StoreError(f"{e} (slurm job {job_id} cancelled)", hint=e.hint) from None
        except (OSError, UsageError) as e:
            run_slurm(["scancel", job_id], check=False)
            raise SchedulerError(f"cannot record slurm job {job_id} (cancelled it): {e}") from None
        run_slurm(["scontrol", "release", job_id])
        return job_id

    def submit_array_dryrun(
        self, infos: Sequence[AppDryRunInfo], max_parallel: int | None = None
    ) -> AppDryRunInfo | str:
        """One ``sbatch --array=0-(N-1)[%K]`` whose element i runs app i (its own body, job
        dir and handle ``JOB_i``), or why not: the apps must ask for the same resources."""
        if max_parallel is not None and max_parallel < 1:
            raise UsageError(f"max_parallel must be >= 1, got {max_parallel}")
        if not infos:
            return "there are no apps"
        if any(not isinstance(i.request, SlurmBatchRequest) or i.app is None for i in infos):
            return "only slurm batch jobs can be array elements"
        job_dir = infos[0].request.job_dir
        if any(i.request.job_dir != job_dir for i in infos) or macros.app_id not in job_dir:
            return "the elements need their own job dirs (job_dir with ${app_id})"
        parts = []
        for info in infos:
            workdir, note = self._workdir(info.request.snapshot, job_dir)
            assert info.app is not None  # checked above
            parts.append(
                render_parts(info.app, info.cfg, self.session_name, job_dir, workdir, note, True)
            )
        why = array_mismatch([head for head, _ in parts])
        if why:
            return why
        script = render_array(parts, max_parallel)
        if why := array_too_big(script):
            return why
        req = SlurmArrayRequest(script, job_dir, tuple(infos), max_parallel)
        return AppDryRunInfo(
            request=req, fmt=_script_of, app=None, cfg=infos[0].cfg, scheduler=BACKEND
        )

    def schedule_array(self, dryrun_info: AppDryRunInfo) -> builtins.list[str]:
        """Submit the array held, record every element (job dir, index), then release it."""
        req: SlurmArrayRequest = dryrun_info.request
        jobdir.check_template(req.job_dir)
        job_id = self._submit_held(req.script)
        ids = [f"{job_id}_{i}" for i in range(len(req.elements))]
        name = req.elements[0].app.name if req.elements[0].app else ""
        try:
            for i, (app_id, info) in enumerate(zip(ids, req.elements, strict=True)):
                array = {"job_id": job_id, "index": i, "size": len(ids), "name": name}
                snap = info.request.snapshot
                self._record_job(app_id, req.job_dir, req.script, info, snap, array)
        except StoreError as e:
            run_slurm(["scancel", job_id], check=False)
            raise StoreError(f"{e} (slurm array {job_id} cancelled)", hint=e.hint) from None
        except (OSError, UsageError) as e:
            run_slurm(["scancel", job_id], check=False)
            raise SchedulerError(
                f"cannot record slurm array {job_id} (cancelled it): {e}"
            ) from None
        run_slurm(["scontrol", "release", job_id])
        return ids

    def _submit_held(self, script: str) -> str:
        """sbatch --hold; the job id (of an array: the array's)."""
        user_umask = current_umask()
        out = run_slurm(
            ["sbatch", "--parsable", "--hold"],
            input=script,
            umask=0o077,  # sbatch passes it on (SLURM_UMASK): batch.log is created private
            env={settings.USER_UMASK: f"{user_umask:04o}"},
        ).stdout
        job_id = out.strip().split(";")[0].split("+")[0]
        if not job_id.isdigit():
            raise SchedulerError(f"sbatch printed {out.strip()!r}, not a job id")
        return job_id

    def _record_job(
        self,
        app_id: str,
        job_dir_template: str,
        script: str,
        info: AppDryRunInfo,
        snap_plan: SnapshotPlan | None,
        array: Mapping[str, Any] | None = None,
    ) -> None:
        """The job dir (script, code snapshot) and the index record of one job or element."""
        job_dir = jobdir.create(job_dir_template.replace(macros.app_id, app_id))
        jobdir.write_new(job_dir, "sbatch.sh", script)
        snap = None
        if snap_plan is not None:
            snapshot.take(snap_plan, job_dir / snapshot.SNAPSHOT_DIR)
            snap = {**snap_plan.to_dict(), "path": str(job_dir / snapshot.SNAPSHOT_DIR)}
        rec: dict[str, Any] = {
            "app_id": app_id,
            "session": self.session_name,
            "created": time.time(),
            # Slurm's job name (the name check in _slurm_info): an array has one for all
            "name": (array or {}).get("name") or (info.app.name if info.app else ""),
            "job_dir": str(job_dir),
            "cwd": current_dir(),
            "app": info.app.to_dict() if info.app else None,
            "cfg": dict(info.cfg),
            "snapshot": snap,
        }
        if array:
            rec["array"] = {k: v for k, v in array.items() if k != "name"}
        store.write_json(self._index_dir() / f"{app_id}.json", rec)

    # -- the index ---------------------------------------------------------------------------

    def _index_dir(self) -> Path:
        root = store.ensure_private_dir(self._home())
        return store.ensure_private_dir(root / "slurm" / "index")

    def _record(self, app_id: str) -> dict[str, Any] | None:
        path = self._home() / "slurm" / "index" / f"{check_app_id(app_id)}.json"
        return store.read_json_or_none(path)

    # -- queries -----------------------------------------------------------------------------

    def _has_accounting(self) -> bool:
        if self._accounting is None:
            try:
                proc = run_slurm(
                    ["sacct", "-n", "-X", "-j", "1", "-o", "JobID"],
                    check=False,
                    timeout=SACCT_TIMEOUT_S,
                )
                self._accounting = NO_ACCOUNTING not in proc.stderr.lower()
            except SchedulerError:  # no sacct, or slurmdbd does not answer: do without
                self._accounting = False
        return self._accounting

    def _slurm_info(self, job_ids: Sequence[str], names: Mapping[str, str]) -> dict[str, JobInfo]:
        """What Slurm knows: scontrol (live + recent), then sacct for the rest."""
        found: dict[str, JobInfo] = {}
        if len(job_ids) == 1:
            proc = run_slurm(["scontrol", "-o", "show", "job", job_ids[0]], check=False)
            if proc.returncode and not forgotten(proc):
                raise SchedulerError(f"scontrol failed: {failure(proc)}")
            found.update(slurm_status.parse_scontrol(proc.stdout))
        elif job_ids:
            proc = run_slurm(
                ["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o", "%i|%T|%j|%r|%N"],
                check=False,
            )
            if proc.returncode and not forgotten(proc):
                raise SchedulerError(f"squeue failed: {failure(proc)}")
            found.update(slurm_status.parse_squeue(proc.stdout))
        # a record whose job id Slurm now uses for another job (e.g. a reset test cluster)
        found = {k: v for k, v in found.items() if not names.get(k) or v.name == names[k]}
        rest = [j for j in job_ids if j not in found]
        # an element that never started has no row of its own, only its array's ID_[2-5] row
        rest += sorted({j.split("_")[0] for j in rest if "_" in j} - set(job_ids))
        if rest and self._has_accounting():
            try:
                proc = run_slurm(
                    [
                        "sacct",
                        "-n",
                        "-P",
                        "-X",
                        "-j",
                        ",".join(rest),
                        "-o",
                        slurm_status.SACCT_FIELDS,
                    ],
                    check=False,
                    timeout=SACCT_TIMEOUT_S,
                )
            except SchedulerError:
                return found  # the callers fall back to the job dir's own record
            if proc.returncode == 0:
                rows = slurm_status.parse_sacct(proc.stdout)
                found.update({k: v for k, v in rows.items() if k in job_ids and k not in found})
        return found

    def _describe(self, app_id: str, rec: Mapping[str, Any] | None) -> DescribeAppResponse:
        names = {app_id: rec.get("name", "")} if rec else {}
        info = self._slurm_info([app_id], names).get(app_id)
        job_dir = Path(rec["job_dir"]) if rec else None
        note = ""
        if info is None:
            info = slurm_status.info_from_result(app_id, job_dir)
            if info is None and rec is None:
                raise AppNotFound(
                    f"no slurm job {app_id} (not in the queue, the accounting "
                    "database or trainlaunch's records)",
                    hint="`trainlaunch list -s slurm` shows the known apps",
                )
            why = (
                "slurm accounting is disabled"
                if not self._has_accounting()
                else "sacct does not know it"
            )
            note = f"slurmctld no longer reports job {app_id} and {why}"
            if info is None:
                info = JobInfo(app_id, "UNKNOWN", source="record")
            else:
                note += "; state from the job's own record"
        app = _app_from(rec)
        status = slurm_status.app_status(info, app, job_dir, note)
        signal_opt = ((rec or {}).get("cfg") or {}).get("signal")
        status = with_history(status, job_dir, info.state, signal_opt)
        meta = {
            "job_dir": str(job_dir) if job_dir else None,
            "batch_log": str(job_dir / BATCH_LOG) if job_dir else None,
            "slurm_state": info.state,
            "nodes": info.nodes,
            "source": info.source,
        }
        hang_meta: dict[str, Any] = {}
        preflight = None
        agents = (
            [
                str(job_dir / r.name / str(k))
                for r in app.roles
                if r.node_agent
                for k in range(r.num_replicas)
            ]
            if job_dir is not None and app is not None
            else []
        )
        if agents and ((rec or {}).get("cfg") or {}).get("preflight"):
            preflight = preflight_record(agents[:1])  # docs/preflight.md
        # a node late to the rendezvous: its agents' line (agent/joins.py), while it runs
        waiting = waiting_record(agents) if status.state == AppState.RUNNING else None
        if job_dir is not None:  # stragglers, stalls, the hang watchdog (docs/hangs.md)
            status, hang_meta = slurm_stacks.hang_view(
                app_id, job_dir, app, (rec or {}).get("cfg") or {}, status
            )
        failure: Diagnosis | None
        if slurm_interrupt.ended_it(status, job_dir):  # Ctrl-C: no failure's diagnosis to seek
            status, failure = slurm_interrupt.as_interrupted(status), slurm_interrupt.failure()
        else:
            failure = slurm_failure.job_failure(info, job_dir, app, status, hang_meta.get("hang"))
        return DescribeAppResponse(
            app_id=app_id,
            status=status,
            app=app,
            cfg=(rec or {}).get("cfg") or {},
            metadata=meta,
            log_dir=str(job_dir) if job_dir else None,
            created=(rec or {}).get("created"),
            cwd=(rec or {}).get("cwd"),
            settings=((rec or {}).get("app") or {}).get("metadata", {}).get("trainlaunch", {}),
            snapshot=(rec or {}).get("snapshot"),
            **hang_fields(hang_meta),
            preflight=preflight,
            waiting=waiting,
            failure=failure,
        )

    def describe(self, app_id: str) -> DescribeAppResponse:
        """Status, AppDef and job dir of one job (also jobs trainlaunch did not start)."""
        check_app_id(app_id)
        return self._describe(app_id, self._record(app_id))

    def session_of(self, app_id: str) -> str | None:
        """The session in trainlaunch's record of the job (None for jobs it did not start)."""
        session = (self._record(check_app_id(app_id)) or {}).get("session")
        return session if isinstance(session, str) and session else None

    def list(self) -> list[ListAppResponse]:
        """trainlaunch's Slurm apps from the index, states refreshed in one query each."""
        index = self._home() / "slurm" / "index"
        recs: dict[str, dict[str, Any]] = {}
        for path in sorted(index.glob("*.json")) if index.is_dir() else []:
            try:
                rec = store.read_json(path)
                recs[str(rec["app_id"])] = rec
            except (OSError, StoreError, KeyError, TypeError):
                continue
        ids = sorted(recs, key=_job_order)
        infos: dict[str, JobInfo] = {}
        for i in range(0, len(ids), 200):
            chunk = ids[i : i + 200]
            infos.update(self._slurm_info(chunk, {j: recs[j].get("name", "") for j in chunk}))
        rows = []
        for job_id, rec in recs.items():
            info = infos.get(job_id) or slurm_status.info_from_result(
                job_id, Path(rec.get("job_dir", ""))
            )
            state = info.app_state if info else AppState.UNKNOWN
            if info is None:
                msg = "slurm no longer reports this job and it left no record of its end"
            elif info.source == "record":
                msg = f"exit code {info.exit_code} (the job's own record; slurm forgot it)"
            else:
                msg = f"slurm {info.state}"
            rows.append(
                ListAppResponse(
                    job_id,
                    state,
                    make_app_handle(BACKEND, rec.get("session") or self.session_name, job_id),
                    rec.get("name", ""),
                    rec.get("created"),
                    msg,
                )
            )
        rows.sort(key=lambda r: (r.created or 0, r.app_id), reverse=True)
        return rows

    def cancel(self, app_id: str) -> None:
        """scancel, then wait (bounded) until Slurm reports a terminal state."""
        self.cancel_many([app_id])

    def cancel_many(self, app_ids: Sequence[str]) -> None:
        """One scancel for them all (a whole job array by its id), then wait (bounded)."""
        live = [a for a in app_ids if not self.describe(a).status.is_terminal]
        if not live:
            return
        run_slurm(["scancel", *self._cancel_targets(live)])
        deadline = time.monotonic() + CANCEL_TIMEOUT_S
        while live:
            live = [a for a in live if not self.describe(a).status.is_terminal]
            if live and time.monotonic() > deadline:
                raise SchedulerError(
                    f"slurm job {live[0]} did not end within {CANCEL_TIMEOUT_S:.0f}s of scancel"
                )
            if live:
                time.sleep(0.2)

    def interrupt(self, app_id: str) -> None:
        """Ctrl-C: SIGINT to every task of the job's steps, so the ranks' ``except
        KeyboardInterrupt`` runs; scancel as stop does if it still runs after WAIT_S
        (interrupt.py)."""
        state = self.describe(app_id).status.state
        if state != AppState.RUNNING:  # nothing runs yet to be interrupted, or it ended
            return self.cancel(app_id)
        rec = self._record(app_id)
        slurm_interrupt.mark(Path(rec["job_dir"]) if rec else None)
        try:
            run_slurm(["scancel", "--signal=INT", app_id])
        except SchedulerError:  # it ended or was requeued meanwhile: stop it as stop does
            return self.cancel(app_id)
        deadline = time.monotonic() + slurm_interrupt.WAIT_S
        while not self.describe(app_id).status.is_terminal:
            if time.monotonic() > deadline:
                return self.cancel(app_id)
            time.sleep(0.2)

    def _cancel_targets(self, live: Sequence[str]) -> builtins.list[str]:
        """The ids to scancel: an array's own id when every element still alive is asked for."""
        arrays: dict[str, set[str]] = {}
        for app_id in live:
            base, sep, _ = app_id.partition("_")
            if sep:
                arrays.setdefault(base, set()).add(app_id)
        targets = [a for a in live if "_" not in a]
        for base, asked in arrays.items():
            index = self._home() / "slurm" / "index"
            elements = [p.stem for p in index.glob(f"{base}_*.json")]
            others = [e for e in elements if e not in asked]
            names = {e: str((self._record(e) or {}).get("name", "")) for e in others}
            infos = self._slurm_info(others, names) if others else {}
            alive = [e for e in others if e in infos and not infos[e].app_state.is_terminal]
            targets += [base] if not alive else sorted(asked, key=_job_order)
        return targets

    def requeue(self, app_id: str) -> None:
        """Preempt the job now (``scontrol requeue``): SIGTERM, KillWait, then it runs again."""
        status = self.describe(app_id).status
        if status.is_terminal:
            raise UsageError(f"slurm job {app_id} is {status.state.name}: nothing to requeue")
        run_slurm(["scontrol", "requeue", app_id])

    # -- logs --------------------------------------------------------------------------------

    def log_replicas(self, app_id: str, role_name: str) -> builtins.list[int]:
        """Replica ids of the role (from the recorded AppDef)."""
        rec = self._known(app_id)
        app = _app_from(rec)
        if app is None:
            raise AppNotFound(f"slurm job {app_id} has no readable AppDef in its record")
        try:
            return list(range(app.role(role_name).num_replicas))
        except UsageError as e:  # it lists the roles
            raise AppNotFound(f"slurm job {app_id}: {e}") from None

    def _known(self, app_id: str) -> dict[str, Any]:
        rec = self._record(app_id)
        if rec is None:
            raise AppNotFound(
                f"slurm job {app_id} was not started by trainlaunch here "
                f"(no record under {self._home() / 'slurm' / 'index'})",
                hint="its logs are wherever its own --output says",
            )
        return rec

    def log_files(
        self, app_id: str, role_name: str, k: int = 0, streams: Stream | None = None
    ) -> builtins.list[Path] | None:
        """Replica k's log files in the job dir: combined.log, or stdout.log/stderr.log.

        A job submitted before the replica runner wrote combined.log has none: its replicas
        are read stdout first, then stderr (logfiles.stream_files).
        """
        rec = self._known(app_id)
        if k not in self.log_replicas(app_id, role_name):
            raise AppNotFound(f"slurm job {app_id} role {role_name!r} has no replica {k}")
        return replica_files(
            Path(rec["job_dir"]), [role_name, str(k)], Stream(streams or Stream.COMBINED).value
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
        """Lines of replica k's files; with should_tail, follow until the job ends.

        since/until are refused (UsageError): the files carry no timestamps.
        """
        if since is not None or until is not None:
            raise UsageError(
                "logs --since/--until are not supported on slurm: its log files carry no "
                "timestamps",
                hint="drop --since/--until (--regex filters lines)",
            )
        files = self.log_files(app_id, role_name, k, streams) or []
        if not should_tail:
            return read_lines(files, regex)
        return follow_lines(files, regex, lambda: self.status(app_id).is_terminal)

    def stacks(self, app_id: str, native: bool = False) -> builtins.list[RankStack]:
        """Every rank's stack: one ``srun --overlap`` step runs py-spy on each node."""
        rec = self._known(app_id)
        app = _app_from(rec)
        if app is None:
            raise AppNotFound(f"slurm job {app_id} has no readable AppDef in its record")
        job_id = app_id
        if "_" in app_id:  # an array element: srun --jobid wants its own job id
            proc = run_slurm(["scontrol", "-o", "show", "job", app_id], check=False)
            job_id = slurm_status.own_job_id(proc.stdout) or app_id
        return slurm_stacks.dump_job(job_id, Path(rec["job_dir"]), app, native, run_slurm)

    def status(self, app_id: str) -> AppStatus:
        """Shortcut: describe(app_id).status."""
        return self.describe(app_id).status


def _script_of(request: SlurmBatchRequest | SlurmArrayRequest) -> str:
    return request.script


def _job_order(app_id: str) -> tuple[int, int]:
    """Sort key of job ids and array elements (``7`` < ``7_0`` < ``7_10`` < ``8``)."""
    base, _, index = app_id.partition("_")
    return (int(base) if base.isdigit() else 0, int(index) + 1 if index.isdigit() else 0)


def _app_from(rec: Mapping[str, Any] | None) -> AppDef | None:
    try:
        return AppDef.from_dict(rec["app"]) if rec and rec.get("app") else None
    except (KeyError, TypeError, ValueError, TrainlaunchError):
        return None


__all__ = [
    "SlurmArrayRequest",
    "SlurmBatchRequest",
    "SlurmScheduler",
    "create_scheduler",
    "run_slurm",
]
