"""Slurm job arrays without a cluster: the array forms of squeue/scontrol/sacct (recorded from
the dev cluster, Slurm 22.05.8), the rendered array script, and that script run by bash."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.unit.test_slurm_script_exec import fakes  # noqa: F401 (the fake srun/scontrol)
from trainlaunch import settings
from trainlaunch.errors import SchedulerError
from trainlaunch.schedulers import get_scheduler
from trainlaunch.schedulers.slurm.backend import SlurmArrayRequest, SlurmScheduler
from trainlaunch.schedulers.slurm.status import (
    array_job_ids,
    own_job_id,
    parse_sacct,
    parse_scontrol,
    parse_squeue,
    task_ids,
)
from trainlaunch.specs import AppDef, AppDryRunInfo, AppState, Resource, Role

# `sbatch --array=0-5%2` (job 31000): elements 0 and 1 run, 2-5 wait for the throttle
SQUEUE_ARRAY = (
    "31000_[2-5%2]|PENDING|probe|JobArrayTaskLimit|\n"
    "31000_1|RUNNING|probe|None|n1\n"
    "31000_0|RUNNING|probe|None|n1\n"
)
# after `scancel 31000`: the never-started rest is one record, each started element its own
SCONTROL_ARRAY = (
    "JobId=31000 ArrayJobId=31000 ArrayTaskId=3-5%2 ArrayTaskThrottle=2 JobName=probe "
    "UserId=root(0) JobState=CANCELLED Reason=JobArrayTaskLimit Restarts=0 ExitCode=0:0 "
    "NodeList=(null)\n"
    "JobId=31003 ArrayJobId=31000 ArrayTaskId=2 ArrayTaskThrottle=2 JobName=probe "
    "UserId=root(0) JobState=CANCELLED Reason=None Restarts=0 ExitCode=0:15 NodeList=n1\n"
)
SACCT_ARRAY = (
    "31000_0|probe|CANCELLED by 0|0:0|n1\n"
    "31000_0.batch|batch|CANCELLED|0:15|n1\n"
    "31000_1|probe|CANCELLED by 0|0:0|n1\n"
    "31000_[2-5%2]|probe|CANCELLED by 0|0:0|None assigned\n"
)


def test_task_lists_as_slurm_prints_them() -> None:
    assert task_ids("2-5%2") == [2, 3, 4, 5]
    assert task_ids("1,3,5-7") == [1, 3, 5, 6, 7]
    assert task_ids("0-15:4") == [0, 4, 8, 12]
    assert task_ids("3") == [3] and task_ids("x-y") == [] and task_ids("") == []
    assert array_job_ids("7_[1,4-5%3]") == ["7_1", "7_4", "7_5"]
    assert array_job_ids("7_3") == ["7_3"] and array_job_ids("7") == ["7"]


def test_squeue_pending_range_is_one_row_per_element() -> None:
    q = parse_squeue(SQUEUE_ARRAY)
    assert sorted(q) == [f"31000_{i}" for i in range(6)]
    assert q["31000_0"].app_state == AppState.RUNNING and q["31000_0"].nodes == "n1"
    assert (q["31000_4"].app_state, q["31000_4"].reason) == (AppState.PENDING, "JobArrayTaskLimit")
    assert q["31000_4"].job_id == "31000_4"


def test_scontrol_keys_elements_by_array_and_task() -> None:
    s = parse_scontrol(SCONTROL_ARRAY)
    assert sorted(s) == ["31000_2", "31000_3", "31000_4", "31000_5"]  # not by JobId=31003
    assert (s["31000_2"].app_state, s["31000_2"].signal) == (AppState.CANCELLED, 15)
    assert s["31000_5"].state == "CANCELLED" and s["31000_5"].name == "probe"
    assert own_job_id(SCONTROL_ARRAY.splitlines()[1]) == "31003"  # what srun --jobid takes


def test_sacct_range_rows_and_element_rows() -> None:
    a = parse_sacct(SACCT_ARRAY)
    assert sorted(a) == [f"31000_{i}" for i in range(6)]  # the .batch step is left out
    assert all(v.app_state == AppState.CANCELLED for v in a.values())
    assert a["31000_0"].nodes == "n1" and a["31000_3"].nodes == "None assigned"


# --- the array script -------------------------------------------------------------------------


def _scheduler(tmp: Path) -> SlurmScheduler:
    return get_scheduler("slurm", "trainlaunch", environ={settings.HOME: str(tmp / "home")})


def _infos(
    sched: SlurmScheduler, roles: list[list[Role]], job_dir: str, seeds: list[int] | None = None
) -> list[AppDryRunInfo]:
    out = []
    for i, rs in enumerate(roles):
        rank = settings.RankSettings(seed=(seeds or [11, 12, 13])[i], metrics_path="/m/${app_id}/")
        app = settings.inject(AppDef("pt", rs), rank, "slurm://trainlaunch/")
        out.append(sched.submit_dryrun(app, {"job_dir": job_dir, "snapshot": "off"}))
    return out


def _role(arg: str, cpu: int = 1) -> Role:
    return Role("t", "dump", (f"--point={arg}",), resource=Resource(cpu=cpu))


def test_array_script_shares_the_request_and_keeps_each_body(tmp_path: Path) -> None:
    sched = _scheduler(tmp_path)
    infos = _infos(sched, [[_role("a")], [_role("b")], [_role("c")]], "/jobs/${app_id}")
    info = sched.submit_array_dryrun(infos, 2)
    assert isinstance(info, AppDryRunInfo) and isinstance(info.request, SlurmArrayRequest)
    script = str(info)
    sbatch = [ln for ln in script.splitlines() if ln.startswith("#SBATCH")]
    assert "#SBATCH --array=0-2%2" in sbatch and len(sbatch) == len(set(sbatch))
    assert "#SBATCH --output=/jobs/%A_%a/batch.log" in sbatch
    assert "#SBATCH --cpus-per-task=1" in sbatch
    for i, (arg, seed) in enumerate(zip("abc", (11, 12, 13), strict=True)):
        body = script.split(f"trainlaunch_element_{i}() {{")[1].split("trainlaunch_element_")[0]
        assert f"--point={arg}" in body and f"TRAINLAUNCH_SEED={seed}" in body
        assert f"    {i}) trainlaunch_element_{i} ;;" in script
    assert 'TRAINLAUNCH_APP_ID="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"' in script
    assert "%" not in str(sched.submit_array_dryrun(infos, None)).split("--array=")[1][:8]


@pytest.mark.parametrize(
    ("roles", "job_dir", "why"),
    [
        ([[_role("a")], [_role("b", cpu=2)]], "/j/${app_id}", "point 1: --cpus-per-task=2"),
        ([[_role("a"), _role("b").replace(name="u")]] * 2, "/j/${app_id}", "heterogeneous"),
        ([[_role("a")], [_role("b")]], "/j/shared", "their own job dirs"),
    ],
)
def test_what_cannot_be_an_array_says_why(
    tmp_path: Path, roles: list[list[Role]], job_dir: str, why: str
) -> None:
    sched = _scheduler(tmp_path)
    reason = sched.submit_array_dryrun(_infos(sched, roles, job_dir), None)
    assert isinstance(reason, str) and why in reason


def test_an_element_runs_its_own_point(tmp_path: Path, fakes: Path) -> None:  # noqa: F811
    sched = _scheduler(tmp_path)
    dump = str(fakes / "dump")
    roles = [[Role("t", dump, (f"--point={a}", "--id=${app_id}"))] for a in "abc"]
    info = sched.submit_array_dryrun(_infos(sched, roles, str(tmp_path / "j" / "${app_id}")), 2)
    (tmp_path / "j" / "900_1").mkdir(parents=True)
    env = {
        "PATH": f"{fakes}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "905",  # an element's own job id differs from the array's
        "SLURM_ARRAY_JOB_ID": "900",
        "SLURM_ARRAY_TASK_ID": "1",
        "SLURM_JOB_NODELIST": "node0",
        "HOME": os.environ.get("HOME", "/root"),
    }
    proc = subprocess.run(
        ["bash", "-s"], input=str(info), env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    d = tmp_path / "j" / "900_1" / "t" / "0"
    assert (d / "argv").read_bytes().split(b"\0")[:-1] == [b"--point=b", b"--id=900_1"]
    got = dict(kv.split("=", 1) for kv in (d / "env").read_text().split("\0")[:-1])
    assert got["TRAINLAUNCH_APP_ID"] == "900_1" and got["TRAINLAUNCH_SEED"] == "12"
    assert (tmp_path / "j" / "900_1" / "result").read_text().startswith("restart=0 exit=0")
    assert not (tmp_path / "j" / "900_0").exists()
    bad = subprocess.run(
        ["bash", "-s"],
        input=str(info),
        env={**env, "SLURM_ARRAY_TASK_ID": "7"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and "no element 7" in bad.stderr


# --- stop: which ids scancel gets (fake Slurm commands: the process boundary) ----------------

FAKE_STATE = 'state() { cat "$FAKE_DIR/$1" 2>/dev/null || echo RUNNING; }\n'
FAKES = {
    "scontrol": FAKE_STATE + '[ "$1" = release ] && exit 0\nid=$4\necho "JobId=9${id#*_}0 '
    "ArrayJobId=${id%_*} "
    'ArrayTaskId=${id#*_} JobName=pt JobState=$(state "$id") Restarts=0 ExitCode=0:0 NodeList=n1"',
    "squeue": FAKE_STATE + 'while [ $# -gt 0 ]; do [ "$1" = -j ] && ids=$2; shift; done\n'
    'for id in ${ids//,/ }; do echo "$id|$(state "$id")|pt|None|n1"; done',
    "scancel": 'echo "$*" >>"$FAKE_DIR/scancel.log"\nfor t in "$@"; do\n'
    "  for e in $FAKE_ELEMENTS; do\n"
    '    if [ "$e" = "$t" ] || [ "${e%_*}" = "$t" ]; then\n'
    '      grep -q COMPLETED "$FAKE_DIR/$e" 2>/dev/null || echo CANCELLED >"$FAKE_DIR/$e"\n'
    "    fi\n  done\ndone",
    "sacct": "exit 0",
    "sbatch": 'cat >"$FAKE_DIR/submitted.sh"; echo "$*" >"$FAKE_DIR/sbatch.args"; echo 900',
}


@pytest.fixture
def fake_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SlurmScheduler, Path]:
    """Sweep points submitted as the array 900 (elements 900_0..2); fake Slurm answers."""
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    for name, body in FAKES.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body + "\n")
        (bin_dir / name).chmod(0o755)
    elements = [f"900_{i}" for i in range(3)]
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DIR", str(state))
    monkeypatch.setenv("FAKE_ELEMENTS", " ".join(elements))
    monkeypatch.setenv(settings.HOME, str(tmp_path / "home"))
    sched = get_scheduler("slurm", "trainlaunch")
    infos = _infos(sched, [[_role(e)] for e in elements], str(tmp_path / "j" / "${app_id}"))
    assert sched.schedule_array(sched.submit_array_dryrun(infos, 2)) == elements
    assert (state / "sbatch.args").read_text() == "--parsable --hold\n"
    assert "#SBATCH --array=0-2%2\n" in (state / "submitted.sh").read_text()
    for e in elements:  # each element: its own job dir and index record, before the release
        assert (tmp_path / "j" / e / "sbatch.sh").is_file()
        rec = json.loads((tmp_path / "home" / "slurm" / "index" / f"{e}.json").read_text())
        assert rec["array"] == {"job_id": "900", "index": int(e[-1]), "size": 3}
    return sched, state


def test_stopping_every_live_element_is_one_scancel_of_the_array(
    fake_array: tuple[SlurmScheduler, Path],
) -> None:
    sched, state = fake_array
    (state / "900_0").write_text("COMPLETED")  # ended already: not asked, not in the way
    sched.cancel_many(["900_2", "900_1"])
    assert (state / "scancel.log").read_text() == "900\n"
    assert [sched.status(f"900_{i}").state for i in range(3)] == [
        AppState.SUCCEEDED,
        AppState.CANCELLED,
        AppState.CANCELLED,
    ]


def test_stopping_one_element_leaves_the_others_running(
    fake_array: tuple[SlurmScheduler, Path],
) -> None:
    sched, state = fake_array
    sched.cancel("900_1")
    assert (state / "scancel.log").read_text() == "900_1\n"
    states = [sched.status(f"900_{i}").state for i in range(3)]
    assert states == [AppState.RUNNING, AppState.CANCELLED, AppState.RUNNING]
    rows = {r.app_id: r.state for r in sched.list()}  # elements list as apps
    assert rows == dict(zip([f"900_{i}" for i in range(3)], states, strict=True))


def test_an_array_script_over_slurms_size_limit_is_not_an_array(tmp_path: Path) -> None:
    sched = _scheduler(tmp_path)
    big = "x" * 100_000  # 45 points x 100 KB of arguments (each one exec can take): > 4 MiB
    infos = _infos(sched, [[_role(big + str(i))] for i in range(45)], "/j/${app_id}", [1] * 45)
    reason = sched.submit_array_dryrun(infos, None)
    assert isinstance(reason, str) and "over Slurm's default max_script_size of 4 MiB" in reason


def test_elements_slurmctld_forgot_are_read_from_the_arrays_sacct_rows(
    fake_array: tuple[SlurmScheduler, Path], tmp_path: Path
) -> None:
    sched, _ = fake_array
    for name, body in {
        "scontrol": "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1",
        "squeue": "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1",
        # like 22.05: elements cancelled before they started have no row of their own
        "sacct": 'while [ $# -gt 0 ]; do [ "$1" = -j ] && ids=$2; shift; done\n'
        'case ",$ids," in *,900,*) echo "900_0|pt|COMPLETED|0:0|n1"\n'
        '  echo "900_[1-2%2]|pt|CANCELLED by 0|0:0|None assigned" ;; esac',
    }.items():
        (tmp_path / "bin" / name).write_text("#!/bin/bash\n" + body + "\n")
    assert [sched.status(f"900_{i}").state for i in range(3)] == [
        AppState.SUCCEEDED,
        AppState.CANCELLED,
        AppState.CANCELLED,
    ]
    assert {r.app_id: r.state for r in sched.list()}["900_2"] == AppState.CANCELLED


def test_an_element_scontrol_says_is_not_found_on_stdout_is_read_from_sacct(
    fake_array: tuple[SlurmScheduler, Path], tmp_path: Path
) -> None:
    # slurmctld purged element 900_0 (MinJobAge): scontrol exits 1 with `Job 900_0 not found`
    # on stdout and nothing on stderr (issue 22 #1); every answer of sacct must be asked then
    sched, _ = fake_array
    for name, body in {
        "scontrol": 'echo "Job $4 not found"; exit 1',
        "sacct": 'while [ $# -gt 0 ]; do [ "$1" = -j ] && ids=$2; shift; done\n'
        'case ",$ids," in *,900_0,*) echo "900_0|pt|COMPLETED|0:0|n1" ;; esac',
    }.items():
        (tmp_path / "bin" / name).write_text("#!/bin/bash\n" + body + "\n")
    assert sched.status("900_0").state == AppState.SUCCEEDED
    (tmp_path / "bin" / "scontrol").write_text("#!/bin/bash\nexit 1\n")  # says nothing at all
    with pytest.raises(SchedulerError) as e:
        sched.status("900_1")
    assert str(e.value) == "scontrol failed: exit status 1"  # never an empty message
