"""preflight_exclude_bad_nodes in the rendered batch script: only when asked for, valid, and
run by bash against a fake Slurm that behaves as the real one does where it matters: ExcNodeList
changes only on a pending job, and the requeue SIGTERMs every process of the job at once (the
scontrol in flight included: that killed the old hold/update/release dance, issue: a job left
held, or released without its exclusion). tests/slurm/test_slurm_preflight.py runs it for real.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from components import dist
from trainlaunch.agent.request import with_preflight
from trainlaunch.schedulers.slurm import exclude
from trainlaunch.schedulers.slurm.attempts import with_history
from trainlaunch.schedulers.slurm.render import render_script, slurm_runopts
from trainlaunch.specs import AppState, AppStatus

CFG = {"preflight": True, "preflight_exclude_bad_nodes": True}
JOB_ID = "4242"
# the node agent: node 0's preflight blames n1 and exits 78 (freeport: the batch host's port)
FAKE_PYTHON = """#!/bin/bash
case $2 in
  trainlaunch.node.freeport) echo 23456 ;;
  *) echo n1 >"$TRAINLAUNCH_REPLICA_LOG_DIR/preflight.exclude"; exit 78 ;;
esac
"""
FAKE_SRUN = """#!/bin/bash
while [[ $1 == --* ]]; do shift; done
SLURM_PROCID=0 SLURMD_NODENAME=n1 "$@"
"""
# $FAKE_SLURM holds the job's state, ExcNodeList, every call, and how many updates to refuse
FAKE_SCONTROL = r"""#!/bin/bash
s=$FAKE_SLURM
echo "$*" >>"$s/calls"
case "$1 $2" in
  "show hostnames") if [ -n "$3" ]; then tr , '\n' <<<"$3"; else echo n1; fi ;;
  "show job") echo "JobId=$3 JobState=$(cat "$s/state") ExcNodeList=$(cat "$s/exc")" ;;
  "requeue "*)  # pending at once; Slurm's SIGTERM reaches every process of the job, this one too
    echo PENDING >"$s/state"
    kill -TERM 0
    sleep 0.2 ;;
  "update "*)
    if [ "$(cat "$s/state")" != PENDING ]; then
      echo "Job is no longer pending execution for job $JOB" >&2; exit 1
    fi
    n=$(cat "$s/refuse")
    if [ "$n" -gt 0 ]; then
      echo $((n - 1)) >"$s/refuse"
      echo "Job is in the process of setting db index for job $JOB" >&2; exit 1
    fi
    [ -e "$s/ignore_update" ] || echo "${3#ExcNodeList=}" >"$s/exc" ;;
  *) echo "fake scontrol: unexpected $*" >&2; exit 2 ;;
esac
"""


def script(cfg: dict[str, object], python: str = "python3") -> str:
    app = with_preflight(dist.ddp("train.py", nnodes="1", python=python), cfg)
    return render_script(app, slurm_runopts().resolve(cfg, "slurm"), "s", "/jobs/${app_id}")


def test_the_exclusion_is_rendered_only_when_asked_for() -> None:
    text = script(CFG)
    assert 'scontrol requeue "$SLURM_JOB_ID"' in text and "requeuehold" not in text
    assert "scontrol release" not in text  # nothing to release: the job is never held
    assert 'paste -sd, - </jobs/"$SLURM_JOB_ID"/train/0/preflight.exclude' in text
    assert "grep -c -E ' action=(requeue|exclude)'" in text  # an exclusion counts as a requeue
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    for cfg in ({"preflight": True}, {"preflight_exclude_bad_nodes": True}):
        assert "ExcNodeList" not in script(cfg)


class Run:
    """What a run against the fake Slurm left: the script's output, the job's records."""

    def __init__(
        self, proc: subprocess.CompletedProcess[str], took: float, job_dir: Path, state: Path
    ) -> None:
        self.proc, self.took, self.job_dir, self.state = proc, took, job_dir, state
        self.calls = (state / "calls").read_text().splitlines()
        self.exc = (state / "exc").read_text().strip()
        self.attempts = (job_dir / "attempts").read_text()

    def reason(self, state: str = "PENDING") -> str:
        st = with_history(AppStatus(AppState.PENDING), self.job_dir, state, None)
        return st.attempts[0].reason


def run_refused(tmp: Path, refuse: int = 0, ignore_update: bool = False) -> Run:
    """Render a 1-node preflight job whose node 0 refuses n1, run it as Slurm would."""
    fakes = tmp / "bin"
    fakes.mkdir()
    for name, text in (
        ("python", FAKE_PYTHON),
        ("srun", FAKE_SRUN),
        ("scontrol", FAKE_SCONTROL),
        ("sinfo", "#!/bin/sh\necho 2\n"),  # the partition's 2 nodes: one left without n1
        ("squeue", "#!/bin/sh\n"),
    ):
        (fakes / name).write_text(text)
        (fakes / name).chmod(0o755)
    state = tmp / "slurm"
    state.mkdir()
    for name, text in (("state", "RUNNING"), ("exc", "(null)"), ("refuse", str(refuse))):
        (state / name).write_text(text + "\n")
    if ignore_update:
        (state / "ignore_update").touch()
    cfg = {**CFG, "job_dir": str(tmp / "jobs" / "${app_id}")}
    app = with_preflight(dist.ddp("train.py", nnodes="1", python=str(fakes / "python")), cfg)
    text = render_script(app, slurm_runopts().resolve(cfg, "slurm"), "s", cfg["job_dir"])
    job_dir = tmp / "jobs" / JOB_ID
    job_dir.mkdir(parents=True)
    env = {
        "PATH": f"{fakes}:{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", "/root"),
        "SLURM_JOB_ID": JOB_ID,
        "JOB": JOB_ID,
        "SLURM_JOB_NODELIST": "n1",
        "SLURM_JOB_PARTITION": "debug",
        "SLURM_JOB_NUM_NODES": "1",
        "FAKE_SLURM": str(state),
    }
    t0 = time.monotonic()
    proc = subprocess.run(  # its own process group: the fake requeue's SIGTERM stays in it
        ["bash", "-s"],
        input=text,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )
    return Run(proc, time.monotonic() - t0, job_dir, state)


def test_the_requeue_sigterm_does_not_kill_the_exclusion(tmp_path: Path) -> None:
    # the first two updates are refused (a busy controller): retried until Slurm shows n1
    run = run_refused(tmp_path, refuse=2)
    assert run.proc.returncode == 78, run.proc.stderr
    out = run.proc.stdout
    assert run.exc == "n1", (out, run.calls)
    verbs = [c.split()[0] for c in run.calls if not c.startswith("show")]
    assert verbs == ["requeue", "update", "update", "update"], run.calls
    assert "Slurm excludes n1 from the next attempt (ExcNodeList=n1)" in out, out
    assert "ERROR" not in out and "Terminated" not in run.proc.stderr
    assert "attempt=0 excluded=n1\nattempt=0 exclusion=ok\n" in run.attempts
    assert run.reason() == "preflight failed on n1 (excluded, requeued)"
    assert not (run.job_dir / "result").exists()  # not the end: the job runs again


def test_an_exclusion_slurm_keeps_refusing_is_loud(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exclude, "UPDATE_WINDOW_S", 1)
    run = run_refused(tmp_path, refuse=1000)
    assert run.proc.returncode == 78 and run.exc == "(null)"
    assert run.took < 10, run.took  # gives up well before a KillWait's SIGKILL would come
    out = run.proc.stdout
    assert (
        "trainlaunch: ERROR: requeued, but n1 could NOT be excluded (Job is in the process "
        f"of setting db index for job {JOB_ID}): the next attempt may land there again" in out
    ), out
    assert "attempt=0 exclusion=failed" in run.attempts
    assert run.reason() == "preflight failed on n1 (requeued but NOT excluded: see batch.log)"


def test_an_update_that_slurm_does_not_show_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exclude, "UPDATE_WINDOW_S", 1)
    run = run_refused(tmp_path, ignore_update=True)
    assert (
        "could NOT be excluded (the update returned but Slurm shows ExcNodeList=(null), "
        "without n1)" in run.proc.stdout
    ), run.proc.stdout
    assert "attempt=0 exclusion=failed" in run.attempts


def test_a_killed_exclusion_reads_as_unconfirmed(tmp_path: Path) -> None:
    """SIGKILL (KillWait) before the script could say: status does not claim the exclusion."""
    (tmp_path / "attempts").write_text(
        "attempt=0 start=1\n"
        "attempt=0 end=2 exit=78 action=exclude term=0 left=UNLIMITED\n"
        "attempt=0 excluded=n1\n"
        "attempt=1 start=9\n"
    )
    st = with_history(AppStatus(AppState.RUNNING), tmp_path, "RUNNING", None)
    assert st.attempts[0].reason == (
        "preflight failed on n1 (requeued, exclusion unconfirmed: see batch.log)"
    )
    assert st.num_requeues == 1
