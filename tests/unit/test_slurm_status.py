"""Slurm states and queries without a cluster: parsers over real 22.05 output, the literal
state map, replica records, and the backend against fake Slurm commands on PATH."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from trainlaunch import settings, store
from trainlaunch.errors import AppNotFound, SchedulerError, SchedulerUnavailable
from trainlaunch.schedulers import get_scheduler
from trainlaunch.schedulers.slurm.backend import SlurmScheduler, run_slurm
from trainlaunch.schedulers.slurm.status import (
    STATE_MAP,
    JobInfo,
    app_status,
    map_state,
    parse_sacct,
    parse_scontrol,
    parse_squeue,
)
from trainlaunch.specs import AppDef, AppState, Role

# Captured from the dev cluster (Slurm 22.05.8); the hetjob 51004 has components 51004, 51005.
SCONTROL_HET = (
    "JobId=51004 HetJobId=51004 HetJobOffset=0 JobName=het HetJobIdSet=51004-51005 "
    "UserId=root(0) JobState=COMPLETED Reason=None Dependency=(null) Requeue=1 Restarts=2 "
    "BatchFlag=1 ExitCode=0:0 NodeList=n1 BatchHost=n1 Comment=x JobState=FAILED\n"
    "JobId=51005 HetJobId=51004 HetJobOffset=1 JobName=het HetJobIdSet=51004-51005 "
    "UserId=root(0) JobState=COMPLETED Reason=None Restarts=2 ExitCode=0:0 NodeList=n2\n"
)
SCONTROL_CANCELLED = (
    "JobId=51006 JobName=wrap UserId=root(0) JobState=CANCELLED Reason=None "
    "Restarts=0 ExitCode=0:15 RunTime=00:00:01 NodeList=n1 BatchHost=n1\n"
)
SQUEUE = "51004+0|RUNNING|het|None|n1\n51004+1|RUNNING|het|None|n2\n51008|PENDING|x|Resources|\n"
SACCT = (
    "51004+0|het|COMPLETED|0:0|n1\n51004+1|het|COMPLETED|0:0|n2\n"
    "51006|wrap|CANCELLED by 0|0:0|n1\n51007|wrap|FAILED|3:0|n1\n51009|x|TIMEOUT|0:15|n2\n"
)


def test_parse_scontrol_keys_a_hetjob_by_its_leader() -> None:
    jobs = parse_scontrol(SCONTROL_HET)
    assert list(jobs) == ["51004"]
    j = jobs["51004"]
    assert (j.state, j.name, j.restarts, j.exit_code, j.nodes) == ("COMPLETED", "het", 2, 0, "n1")
    c = parse_scontrol(SCONTROL_CANCELLED)["51006"]
    assert (c.app_state, c.exit_code, c.signal) == (AppState.CANCELLED, 0, 15)


def test_parse_squeue_and_sacct() -> None:
    q = parse_squeue(SQUEUE)
    assert sorted(q) == ["51004", "51008"] and q["51008"].reason == "Resources"
    a = parse_sacct(SACCT)
    assert a["51006"].state == "CANCELLED" and a["51006"].app_state == AppState.CANCELLED
    assert (a["51007"].app_state, a["51007"].exit_code) == (AppState.FAILED, 3)
    assert a["51009"].state == "TIMEOUT" and a["51004"].nodes == "n1"


def test_the_state_map_is_literal_and_unknown_states_are_unknown() -> None:
    assert map_state("COMPLETED") == AppState.SUCCEEDED
    assert map_state("CANCELLED by 1234") == AppState.CANCELLED
    assert map_state("PREEMPTED") == AppState.FAILED and map_state("TIMEOUT") == AppState.FAILED
    assert map_state("REQUEUED") == AppState.PENDING
    assert map_state("SOMETHING_NEW") == AppState.UNKNOWN and map_state("") == AppState.UNKNOWN
    assert all(isinstance(v, AppState) for v in STATE_MAP.values())


@pytest.mark.parametrize(
    ("state", "words"),
    [
        ("TIMEOUT", "TIMEOUT: the job reached its time limit"),
        ("PREEMPTED", "PREEMPTED: the job was preempted"),
        ("NODE_FAIL", "NODE_FAIL: a node of the job failed"),
    ],
)
def test_preemption_and_timeout_are_reported_as_themselves(state: str, words: str) -> None:
    st = app_status(JobInfo("9", state, exit_code=0, signal=15), None, None)
    assert st.state == AppState.FAILED and words in st.msg and st.exit_code == 143


def write_status(job_dir: Path, role: str, k: int, text: str) -> None:
    d = job_dir / role / str(k)
    d.mkdir(parents=True, exist_ok=True)
    (d / "replica.status").write_text(text)


def test_replicas_of_a_cancelled_job(tmp_path: Path) -> None:
    app = AppDef("a", [Role("r", "x", num_replicas=3)])
    write_status(tmp_path, "r", 0, "restart=0 host=n1 start=1 exit=0 end=2")
    write_status(tmp_path, "r", 1, "restart=0 host=n2 start=1 exit=143 end=5")
    st = app_status(JobInfo("7", "CANCELLED", restarts=0), app, tmp_path)
    states = [(r.state, r.exit_code, r.signal) for r in st.replicas()]
    assert states == [
        (AppState.SUCCEEDED, 0, None),
        (AppState.CANCELLED, 143, "SIGTERM"),
        (AppState.CANCELLED, None, None),
    ]


def test_replicas_of_a_running_job_after_a_requeue(tmp_path: Path) -> None:
    app = AppDef("a", [Role("r", "x", num_replicas=2)])
    write_status(tmp_path, "r", 0, "restart=1 host=n1 start=9")
    write_status(tmp_path, "r", 1, "restart=0 host=n2 start=1 exit=3 end=2")  # old attempt
    st = app_status(JobInfo("7", "RUNNING", restarts=1), app, tmp_path)
    assert [r.state for r in st.replicas()] == [AppState.RUNNING, AppState.PENDING]
    assert st.num_restarts == 1 and st.exit_code is None


def test_the_root_cause_is_the_first_failure_not_a_stop_signal(tmp_path: Path) -> None:
    app = AppDef("a", [Role("r", "x", num_replicas=3)])
    write_status(tmp_path, "r", 0, "restart=0 host=n1 start=1 exit=143 end=3")
    write_status(tmp_path, "r", 1, "restart=0 host=n2 start=1 exit=9 end=4")
    (tmp_path / "r" / "1" / "stderr.log").write_text("x\nTraceback: boom\n")
    st = app_status(JobInfo("7", "FAILED", exit_code=9, restarts=0), app, tmp_path)
    assert st.exit_code == 9 and "r/1 exited with 9 on n2" in st.msg
    assert st.structured_error_msg == "x\nTraceback: boom"
    assert [r.state for r in st.replicas()] == [
        AppState.CANCELLED,
        AppState.FAILED,
        AppState.CANCELLED,
    ]


# --- the backend against fake commands (the process boundary) -------------------------------


def fake_bin(tmp_path: Path, **scripts: str) -> str:
    """A PATH of executables named after the keyword arguments (bash bodies)."""
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    for name, body in scripts.items():
        p = d / name
        p.write_text("#!/bin/bash\n" + body + "\n")
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(d)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(settings.HOME, str(tmp_path / "home"))
    return tmp_path / "home"


def sched() -> SlurmScheduler:
    return get_scheduler("slurm", "trainlaunch")


def record(home: Path, job_id: str, job_dir: Path, app: AppDef) -> None:
    index = store.ensure_private_dir(home / "slurm" / "index")
    store.write_json(
        index / f"{job_id}.json",
        {
            "app_id": job_id,
            "session": "trainlaunch",
            "name": app.name,
            "job_dir": str(job_dir),
            "app": app.to_dict(),
            "cfg": {},
            "created": 1.0,
        },
    )


def test_without_slurm_the_backend_is_unavailable(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    info = sched().submit_dryrun(AppDef("a", [Role("r", "echo")]), {})  # no Slurm needed
    with pytest.raises(SchedulerUnavailable, match="slurm backend unavailable: sbatch not found"):
        sched().schedule(info)


def test_command_failures_are_one_line_with_slurms_last_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "PATH",
        fake_bin(
            tmp_path,
            sbatch=(
                "echo 'sbatch: error: something first' >&2\n"
                "echo 'sbatch: error: Batch job submission failed: Node count specification invalid'"
                " >&2\nexit 1"
            ),
        )
        + os.pathsep
        + os.environ["PATH"],
    )
    with pytest.raises(SchedulerError) as e:
        run_slurm(["sbatch", "--parsable"], input="#!/bin/bash\n")
    assert str(e.value) == (
        "sbatch failed: sbatch: error: Batch job submission failed: "
        "Node count specification invalid"
    )


def test_a_job_slurm_forgot_on_a_cluster_without_accounting(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "PATH",
        fake_bin(
            tmp_path,
            scontrol="echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1",
            sacct="echo 'sacct: error: Slurm accounting storage is disabled' >&2; exit 1",
        )
        + os.pathsep
        + os.environ["PATH"],
    )
    app = AppDef("a", [Role("r", "x")])
    job_dir = tmp_path / "jobs" / "77"
    record(home, "77", job_dir, app)
    write_status(job_dir, "r", 0, "restart=0 host=n1 start=1 exit=5 end=2")
    (job_dir / "result").write_text("restart=0 exit=5 end=2\n")
    st = sched().describe("77").status
    assert st.state == AppState.FAILED and st.exit_code == 5
    assert "slurm accounting is disabled" in st.msg and "job's own record" in st.msg
    (job_dir / "result").unlink()  # e.g. it was cancelled: nothing says how it ended
    st = sched().describe("77").status
    assert st.state == AppState.UNKNOWN and "accounting is disabled" in st.msg
    with pytest.raises(AppNotFound, match="no slurm job 78"):
        sched().describe("78")
    [row] = sched().list()
    assert (row.app_id, row.state, row.app_handle) == (
        "77",
        AppState.UNKNOWN,
        "slurm://trainlaunch/77",
    )


def test_a_record_whose_job_id_slurm_reused_is_not_confused(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "PATH",
        fake_bin(
            tmp_path,
            scontrol="echo 'JobId=77 JobName=other JobState=RUNNING Restarts=0 "
            "ExitCode=0:0 NodeList=n1'",
            sacct="exit 0",
        )
        + os.pathsep
        + os.environ["PATH"],
    )
    record(home, "77", tmp_path / "jobs" / "77", AppDef("mine", [Role("r", "x")]))
    st = sched().describe("77").status
    assert st.state == AppState.UNKNOWN and "no longer reports job 77" in st.msg


def test_logs_need_a_record(home: Path) -> None:
    with pytest.raises(AppNotFound, match="not started by trainlaunch"):
        list(sched().log_iter("5", "r", 0))
