"""Slurm states and status: parse scontrol/squeue/sacct output and the job dir's records.

Pure functions over text and files. Where each answer comes from (slurm.py asks in order):

1. ``scontrol -o show job ID``: live jobs and jobs that ended less than ``MinJobAge`` ago
   (no accounting lag, exact exit code and restart count);
2. ``sacct -P -X -j ID``: older jobs, when accounting is on;
3. the job dir: the batch script's ``result`` file, when Slurm no longer knows the job.

Replicas: every replica script writes ``replica.status`` (attempt, host, exit code) in its
log directory, so per-replica state and exit codes need no accounting at all.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

from trainlaunch.node.exits import signal_name
from trainlaunch.schedulers.slurm.render import RESULT_FILE, STATUS_FILE, STREAM_FILES
from trainlaunch.specs import AppDef, AppState, AppStatus, ReplicaStatus, RoleStatus
from trainlaunch.values import frozen

# Every job state of Slurm 22.05-24.11 (squeue/scontrol long names). Unknown -> UNKNOWN.
STATE_MAP: dict[str, AppState] = {
    "BOOT_FAIL": AppState.FAILED,
    "CANCELLED": AppState.CANCELLED,
    "COMPLETED": AppState.SUCCEEDED,
    "COMPLETING": AppState.RUNNING,
    "CONFIGURING": AppState.PENDING,
    "DEADLINE": AppState.FAILED,
    "FAILED": AppState.FAILED,
    "NODE_FAIL": AppState.FAILED,
    "OUT_OF_MEMORY": AppState.FAILED,
    "PENDING": AppState.PENDING,
    "PREEMPTED": AppState.FAILED,
    "REQUEUED": AppState.PENDING,
    "REQUEUE_FED": AppState.PENDING,
    "REQUEUE_HOLD": AppState.PENDING,
    "RESIZING": AppState.RUNNING,
    "RESV_DEL_HOLD": AppState.PENDING,
    "REVOKED": AppState.FAILED,
    "RUNNING": AppState.RUNNING,
    "SIGNALING": AppState.RUNNING,
    "SPECIAL_EXIT": AppState.FAILED,
    "STAGE_OUT": AppState.RUNNING,
    "STOPPED": AppState.RUNNING,
    "SUSPENDED": AppState.PENDING,
    "TIMEOUT": AppState.FAILED,
}
WHY = {  # words for the states whose name alone does not say what happened
    "TIMEOUT": "the job reached its time limit",
    "PREEMPTED": "the job was preempted",
    "NODE_FAIL": "a node of the job failed",
    "OUT_OF_MEMORY": "a replica ran out of memory",
    "BOOT_FAIL": "a node failed to boot",
    "DEADLINE": "the job reached its deadline",
    "REQUEUED": "requeued; it starts again when Slurm allows",
}
_FIELD = re.compile(
    r"(?:^|\s)(JobId|HetJobId|HetJobOffset|ArrayJobId|ArrayTaskId|JobName|JobState|Reason|"
    r"Restarts|ExitCode|NodeList|BatchHost)=(\S*)"
)
_ARRAY_ID = re.compile(r"(\d+)_(?:\[([^\]]*)\]|(\d+))")  # 7_3, 7_[2-5%2], 7_[1,3,5-7]
ERROR_TAIL_LINES = 20
MAX_ARRAY_TASKS = 100_000


def map_state(slurm_state: str) -> AppState:
    """Slurm's state (``CANCELLED by 0`` included) -> AppState; unknown states -> UNKNOWN."""
    word = (slurm_state.split() or [""])[0].rstrip("+")
    return STATE_MAP.get(word, AppState.UNKNOWN)


@frozen
class JobInfo:
    """What Slurm says about one job (the leader component of a hetjob)."""

    job_id: str
    state: str  # Slurm's own word: RUNNING, TIMEOUT, ...
    name: str = ""
    reason: str = ""
    exit_code: int | None = None
    signal: int | None = None
    restarts: int | None = None
    nodes: str = ""
    source: str = "scontrol"

    @property
    def app_state(self) -> AppState:
        """The state in trainlaunch's words."""
        return map_state(self.state)


def _exit(text: str) -> tuple[int | None, int | None]:
    m = re.fullmatch(r"(\d+):(\d+)", text.strip())
    return (int(m[1]), int(m[2])) if m else (None, None)


def task_ids(spec: str) -> list[int]:
    """A job array's task list as Slurm prints it (``2-5%2``, ``1,3,5-7``, ``0-15:4``)."""
    out: list[int] = []
    for part in spec.split("%")[0].split(","):
        span, _, step = part.partition(":")
        lo, _, hi = span.partition("-")
        if not lo.isdigit() or not (hi or lo).isdigit() or not (step or "1").isdigit():
            continue
        if int(hi or lo) - int(lo) > MAX_ARRAY_TASKS:  # no Slurm allows more; never a huge list
            continue
        out += range(int(lo), int(hi or lo) + 1, max(int(step or 1), 1))
    return out


def array_job_ids(job_id: str) -> list[str]:
    """``7_[2-5%2]`` (a pending range) -> 7_2 ... 7_5; ``7_3`` and ``7`` stay as they are."""
    m = _ARRAY_ID.fullmatch(job_id)
    if m is None or m[3] is not None:
        return [job_id]
    return [f"{m[1]}_{i}" for i in task_ids(m[2])]


def parse_scontrol(text: str) -> dict[str, JobInfo]:
    """``scontrol -o show job`` lines -> {job id: info}; a hetjob is keyed by its leader.

    An array element is keyed ``ARRAYJOB_TASK`` (a pending range: one key per element).
    """
    out: dict[str, JobInfo] = {}
    for line in text.splitlines():
        f: dict[str, str] = {}
        for key, value in _FIELD.findall(line):
            f.setdefault(key, value)  # the first: a --comment could repeat a key later
        if "JobId" not in f or f.get("HetJobOffset", "0") not in ("0", ""):
            continue
        rc, sig = _exit(f.get("ExitCode", ""))
        restarts = f.get("Restarts", "")
        job_id = f.get("HetJobId") or f["JobId"]
        ids = [job_id]
        if f.get("ArrayJobId") and f.get("ArrayTaskId"):
            ids = [f"{f['ArrayJobId']}_{i}" for i in task_ids(f["ArrayTaskId"])]
        for one in ids:
            out[one] = JobInfo(
                job_id=one,
                state=f.get("JobState", ""),
                name=f.get("JobName", ""),
                reason=f.get("Reason", ""),
                exit_code=rc,
                signal=sig,
                restarts=int(restarts) if restarts.isdigit() else None,
                nodes=f.get("NodeList", ""),
                source="scontrol",
            )
    return out


def own_job_id(text: str) -> str | None:
    """An array element's own job id (``JobId=``; srun --jobid takes no ``7_3``) from
    ``scontrol -o show job 7_3``."""
    m = re.search(r"(?:^|\s)JobId=(\d+)", text)
    return m[1] if m else None


def parse_squeue(text: str) -> dict[str, JobInfo]:
    """``squeue -h -o %i|%T|%j|%r|%N`` -> {job id: info} (hetjob: the ``ID+0`` row;
    a job array's pending ``ID_[2-5%2]`` row: one key per element)."""
    out: dict[str, JobInfo] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 5:
            continue
        job_id, _, offset = parts[0].partition("+")
        if offset not in ("", "0"):
            continue
        for one in array_job_ids(job_id):
            out[one] = JobInfo(one, parts[1], parts[2], parts[3], nodes=parts[4], source="squeue")
    return out


SACCT_FIELDS = "JobID,JobName,State,ExitCode,NodeList"


def parse_sacct(text: str) -> dict[str, JobInfo]:
    """``sacct -n -P -X -o JobID,JobName,State,ExitCode,NodeList`` -> {job id: info}
    (array elements as ``ID_TASK``, a range row ``ID_[2-5%2]`` expanded)."""
    out: dict[str, JobInfo] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 5 or "." in parts[0]:
            continue
        job_id, _, offset = parts[0].partition("+")
        if offset not in ("", "0"):
            continue
        rc, sig = _exit(parts[3])
        for one in array_job_ids(job_id):  # an element never started: the ID_[2-5%2] row
            out[one] = JobInfo(
                one,
                (parts[2].split() or [""])[0],
                parts[1],
                exit_code=rc,
                signal=sig,
                nodes=parts[4],
                source="sacct",
            )
    return out


def read_kv(path: Path) -> dict[str, str] | None:
    """A one-line ``key=value ...`` record (replica.status, result), or None."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return dict(kv.split("=", 1) for kv in text.split() if "=" in kv)


def _int(d: dict[str, str] | None, key: str) -> int | None:
    v = (d or {}).get(key, "")
    return int(v) if v.lstrip("-").isdigit() else None


def _float(d: dict[str, str] | None, key: str) -> float:
    try:
        return float((d or {}).get(key, "inf"))
    except ValueError:
        return float("inf")


def tail(path: Path, n: int = ERROR_TAIL_LINES) -> str:
    """The last n lines of a file ('' when missing)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", errors="replace").splitlines()[-n:])


_STOPPED = (128 + signal.SIGTERM, 128 + signal.SIGKILL)


def _replica_state(job: AppState, started: bool, rc: int | None, other_failed: bool) -> AppState:
    """One replica's state in the current attempt (started: it has a record of it)."""
    if rc == 0:
        return AppState.SUCCEEDED
    if (
        job.is_terminal
        and (job == AppState.CANCELLED or other_failed)
        and (rc is None or rc in _STOPPED)
    ):
        return AppState.CANCELLED  # stopped by scancel, or because another replica failed
    if rc is not None:
        return AppState.FAILED
    if not started:
        return job if job.is_terminal else AppState.PENDING
    return job


def info_from_result(job_id: str, job_dir: Path | None) -> JobInfo | None:
    """The job's own record of how it ended (when Slurm has forgotten the job)."""
    res = read_kv(job_dir / RESULT_FILE) if job_dir else None
    rc = _int(res, "exit")
    if rc is None:
        return None
    return JobInfo(
        job_id,
        "COMPLETED" if rc == 0 else "FAILED",
        exit_code=rc,
        restarts=_int(res, "restart"),
        source="record",
    )


def app_status(
    info: JobInfo, app: AppDef | None, job_dir: Path | None, note: str = ""
) -> AppStatus:
    """The app's status from Slurm's view of the job and the replicas' own records."""
    state = info.app_state
    records = {}
    if app is not None and job_dir is not None:
        for role in app.roles:
            for k in range(role.num_replicas):
                records[(role.name, k)] = read_kv(job_dir / role.name / str(k) / STATUS_FILE)
    attempt = info.restarts
    if attempt is None:
        attempt = max((_int(r, "restart") or 0 for r in records.values() if r), default=0)
    exits = {
        key: _int(rec, "exit")
        for key, rec in records.items()
        if rec is not None and _int(rec, "restart") == attempt
    }
    # The root cause: the earliest failure that was not a stop signal (srun stops the other
    # replicas with SIGTERM/SIGKILL after the first failure; scancel does the same).
    failed = sorted(
        (rc in _STOPPED, _float(records[key], "end"), key) for key, rc in exits.items() if rc
    )
    first_key = failed[0][2] if failed and state != AppState.CANCELLED else None
    roles = []
    for role in app.roles if app is not None else ():
        reps = []
        for k in range(role.num_replicas):
            key = (role.name, k)
            rc = exits.get(key)
            rstate = _replica_state(state, key in exits, rc, first_key not in (None, key))
            message = ""
            if rstate == AppState.FAILED and job_dir is not None:
                message = tail(job_dir / role.name / str(k) / STREAM_FILES["stderr"])
            reps.append(
                ReplicaStatus(
                    id=k,
                    state=rstate,
                    role=role.name,
                    hostname=(records[key] or {}).get("host", ""),
                    exit_code=rc,
                    signal=signal_name(rc),
                    restarts=attempt,
                    message=message,
                )
            )
        roles.append(RoleStatus(role.name, tuple(reps)))
    first = next(
        (r for r in (x for rs in roles for x in rs.replicas) if (r.role, r.id) == first_key), None
    )
    msg = f"slurm job {info.job_id} {info.state}"
    if info.state in WHY:
        msg += f": {WHY[info.state]}"
    if info.reason and info.reason not in ("None", "(null)") and not state.is_terminal:
        msg += f" ({info.reason})"
    if first is not None and state in (AppState.FAILED, AppState.RUNNING):
        msg += (
            f"; {first.role}/{first.id} exited with {first.exit_code}"
            + (f" ({first.signal})" if first.signal else "")
            + (f" on {first.hostname}" if first.hostname else "")
        )
    if note:
        msg += f" [{note}]"
    exit_code = None
    if state == AppState.SUCCEEDED:
        exit_code = 0
    elif state == AppState.FAILED:
        exit_code = first.exit_code if first is not None else info.exit_code
        if not exit_code and info.signal:
            exit_code = 128 + info.signal
    return AppStatus(
        state=state,
        num_restarts=attempt,
        msg=msg,
        structured_error_msg=first.message if first is not None else "",
        ui_url=f"file://{job_dir}" if job_dir else None,
        roles=tuple(roles),
        exit_code=exit_code,
    )
