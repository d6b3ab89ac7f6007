"""The Slurm backend against a real cluster (two emulated nodes in CI), driven through the
scheduler registry exactly as the Runner drives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slurm.conftest import run_app, wait_for
from trainlaunch import settings
from trainlaunch.errors import SchedulerError
from trainlaunch.schedulers import get_scheduler
from trainlaunch.schedulers.slurm.backend import SlurmScheduler
from trainlaunch.specs import AppDef, AppState, Role

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]
TORTURE = (
    "two words",
    "it's",
    'say "hi"',
    "$(touch pwned)",
    "`touch pwned`",
    "line1\nline2",
    "naïve ☃ 日本",
    "$HOME ${HOME}",
    "back\\slash",
    "",
    "*",
    "--id=${app_id}",
    "-",
    "a=b",
    "\t",
    "#x",
    "EOF_ROLE_0",
)
ALLREDUCE = """\
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("rank=%s world=%s local=%s node=%s sum=%s" % (os.environ["RANK"], os.environ["WORLD_SIZE"],
      os.environ["LOCAL_RANK"], os.environ["SLURMD_NODENAME"], t.item()), flush=True)
dist.destroy_process_group()
"""


def test_contract_echo_then_cancel_a_sleeper_then_list(
    slurm: SlurmScheduler, two_nodes: None
) -> None:
    echo = AppDef(
        "echo",
        [
            Role(
                "echo",
                "bash",
                (
                    "-c",
                    'echo "seed=$TRAINLAUNCH_SEED replica=$TRAINLAUNCH_REPLICA_ID '
                    'node=$SLURMD_NODENAME"',
                ),
                num_replicas=2,
            )
        ],
    )
    echo = settings.inject(echo, settings.RankSettings(seed=1234), "slurm://trainlaunch/")
    j1 = run_app(slurm, echo)
    st = wait_for(slurm, j1)
    assert st.state == AppState.SUCCEEDED and st.exit_code == 0, st
    lines = [list(slurm.log_iter(j1, "echo", k)) for k in (0, 1)]
    assert lines == [["seed=1234 replica=0 node=n1"], ["seed=1234 replica=1 node=n2"]]
    assert [(r.state, r.hostname) for r in st.replicas()] == [
        (AppState.SUCCEEDED, "n1"),
        (AppState.SUCCEEDED, "n2"),
    ]

    j2 = run_app(slurm, AppDef("sleeper", [Role("sleeper", "sleep", ("600",))]))
    wait_for(slurm, j2, lambda s: s.state == AppState.RUNNING)
    slurm.cancel(j2)
    st2 = slurm.describe(j2).status
    assert st2.state == AppState.CANCELLED and "CANCELLED" in st2.msg
    listed = {r.app_id: (r.state, r.name, r.app_handle) for r in slurm.list()}
    assert listed == {
        j1: (AppState.SUCCEEDED, "echo", f"slurm://trainlaunch/{j1}"),
        j2: (AppState.CANCELLED, "sleeper", f"slurm://trainlaunch/{j2}"),
    }


def test_ddp_all_reduce_over_two_nodes(slurm: SlurmScheduler, two_nodes: None) -> None:
    from trainlaunch.components.dist import ddp

    Path("allreduce.py").write_text(ALLREDUCE)
    app = ddp(
        "allreduce.py",
        nnodes="2",
        nproc_per_node="2",
        env={"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
    )
    job_id = run_app(slurm, app)
    st = wait_for(slurm, job_id)
    role = app.roles[0].name
    logs = [
        line
        for k in (0, 1)
        for line in slurm.log_iter(job_id, role, k)
        if line.startswith("rank=") or "rank=" in line
    ]
    assert st.state == AppState.SUCCEEDED, (st, logs)
    seen = {}
    for line in logs:
        fields = dict(kv.split("=") for kv in line[line.index("rank=") :].split())
        seen[int(fields["rank"])] = fields
    assert sorted(seen) == [0, 1, 2, 3], logs
    assert {f["world"] for f in seen.values()} == {"4"}
    assert {f["sum"] for f in seen.values()} == {"10.0"}
    assert [seen[r]["node"] for r in range(4)] == ["n1", "n1", "n2", "n2"]
    assert [seen[r]["local"] for r in range(4)] == ["0", "1", "0", "1"]


def test_a_failing_rank_fails_the_app_with_its_exit_code(
    slurm: SlurmScheduler, two_nodes: None
) -> None:
    role = Role(
        "t",
        "bash",
        (
            "-c",
            'if [ "$TRAINLAUNCH_REPLICA_ID" = 1 ]; then '
            'echo "boom on $SLURMD_NODENAME" >&2; exit 7; fi; sleep 300',
        ),
        num_replicas=2,
    )
    job_id = run_app(slurm, AppDef("fail", [role]))
    st = wait_for(slurm, job_id)  # well before the survivor's 300 s
    assert st.state == AppState.FAILED and st.exit_code == 7, st
    assert "t/1 exited with 7 on n2" in st.msg and st.structured_error_msg == "boom on n2"
    r0, r1 = st.replicas()
    assert (r1.state, r1.exit_code, r1.hostname) == (AppState.FAILED, 7, "n2")
    assert r0.state == AppState.CANCELLED  # stopped because replica 1 failed


def test_quoting_torture_reaches_the_rank_exactly(slurm: SlurmScheduler) -> None:
    code = (
        "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'odd': os.environ['ODD']}))"
    )
    odd = "".join(TORTURE)
    role = Role("t", sys.executable, ("-c", code, *TORTURE), env={"ODD": odd})
    job_id = run_app(slurm, AppDef("torture", [role]))
    st = wait_for(slurm, job_id)
    out = list(slurm.log_iter(job_id, "t", 0))
    assert st.state == AppState.SUCCEEDED, (st, out)
    got = json.loads(out[-1])
    expected = [a.replace("${app_id}", job_id) for a in TORTURE]
    assert got == {"argv": expected, "odd": odd.replace("${app_id}", job_id)}
    assert not list(Path.cwd().rglob("pwned"))


def test_more_nodes_than_exist_is_rejected_at_submission(
    slurm: SlurmScheduler, slurm_nodes: int
) -> None:
    config = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30
    ).stdout
    if "EnforcePartLimits       = ALL" not in config and "= ANY" not in config:
        pytest.skip("this cluster queues impossible jobs (EnforcePartLimits is not ALL/ANY)")
    app = AppDef("huge", [Role("r", "true", num_replicas=slurm_nodes + 1)])
    with pytest.raises(SchedulerError) as e:
        run_app(slurm, app)
    assert str(e.value) == (
        "sbatch failed: sbatch: error: Batch job submission failed: "
        "Node count specification invalid"
    )
    assert slurm.list() == []  # nothing recorded


def test_status_and_logs_from_another_directory_and_tail(
    slurm: SlurmScheduler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    role = Role(
        "t", "bash", ("-c", "for i in 1 2 3 4 5; do echo line $i; sleep 0.3; done; echo bye >&2")
    )
    job_id = run_app(slurm, AppDef("talk", [role]))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    other = get_scheduler("slurm", "another-session")  # a fresh process would do the same
    wait_for(other, job_id, lambda s: s.state in (AppState.RUNNING, AppState.SUCCEEDED))
    followed = list(other.log_iter(job_id, "t", 0, should_tail=True))  # ends with the job
    assert followed == [f"line {i}" for i in range(1, 6)] + ["bye"]
    resp = other.describe(job_id)
    assert resp.state == AppState.SUCCEEDED and resp.app is not None
    assert resp.cwd == str(tmp_path / "work")
    assert Path(resp.metadata["job_dir"]).is_absolute()
    assert list(other.log_iter(job_id, "t", 0, streams="stderr")) == ["bye"]
    assert list(other.log_iter(job_id, "t", 0, regex="line [24]")) == ["line 2", "line 4"]
    batch_log = Path(resp.metadata["batch_log"]).read_text()
    assert f"trainlaunch: job {job_id} attempt 0" in batch_log


def test_max_retries_requeues_until_it_succeeds(slurm: SlurmScheduler) -> None:
    role = Role(
        "t",
        "bash",
        ("-c", 'echo "attempt $TRAINLAUNCH_RESTART_COUNT"; [ "$TRAINLAUNCH_RESTART_COUNT" -ge 1 ]'),
        max_retries=1,
    )
    job_id = run_app(slurm, AppDef("retry", [role]))
    st = wait_for(slurm, job_id, timeout=240)  # Slurm holds a requeued job cred_expire seconds
    assert st.state == AppState.SUCCEEDED and st.num_restarts == 1, st
    assert list(slurm.log_iter(job_id, "t", 0)) == ["attempt 0", "attempt 1"]
    [replica] = st.replicas()
    assert replica.restarts == 1 and replica.exit_code == 0


def test_two_roles_run_as_one_heterogeneous_job(slurm: SlurmScheduler, two_nodes: None) -> None:
    show = 'echo "$TRAINLAUNCH_ROLE $SLURMD_NODENAME rank0=$TRAINLAUNCH_RANK0_HOST"'
    app = AppDef(
        "pair", [Role("first", "bash", ("-c", show)), Role("second", "bash", ("-c", show))]
    )
    job_id = run_app(slurm, app)
    st = wait_for(slurm, job_id)
    assert st.state == AppState.SUCCEEDED, st
    first, second = (list(slurm.log_iter(job_id, r, 0)) for r in ("first", "second"))
    node = first[0].split()[1]
    assert first == [f"first {node} rank0={node}"]
    assert second[0].startswith("second ") and second[0].endswith(f"rank0={node}")
    assert second[0].split()[1] != node  # one node per component


def test_cli_run_wait_and_logs(slurm: SlurmScheduler, tmp_path: Path) -> None:
    env = {**os.environ, "TRAINLAUNCH_CONFIG": "", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "trainlaunch"]
    run = subprocess.run(
        [*cmd, "run", "-s", "slurm", "--wait", "utils.echo", "--msg", "hi from slurm"],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    handle = run.stdout.strip().splitlines()[0]
    assert handle.startswith("slurm://trainlaunch/")
    logs = subprocess.run(
        [*cmd, "logs", handle], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path
    )
    assert logs.returncode == 0 and "hi from slurm" in logs.stdout, logs


METRICS_WRITER = """\
import json, os
path = os.environ["TRAINLAUNCH_METRICS_PATH"]  # every rank gets it
os.makedirs(path.replace("{rank}", "0") if path.endswith("/") else os.path.dirname(path), exist_ok=True)
target = os.path.join(path, "rank%s.jsonl" % os.environ["RANK"]) if path.endswith("/") else path
with open(target.replace("{rank}", os.environ["RANK"]), "a") as f:
    f.write(json.dumps({"step": 5, "epoch": 0, "rank": int(os.environ["RANK"]),
                        "loss": 1.0 + int(os.environ["RANK"])}) + "\\n")
"""


@pytest.mark.parametrize("metrics_path", [None, "./rel-metrics/"])
def test_cli_metrics_of_a_finished_app_from_another_directory(
    slurm: SlurmScheduler, tmp_path: Path, metrics_path: str | None
) -> None:
    env = {**os.environ, "TRAINLAUNCH_CONFIG": "", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "trainlaunch"]
    work = tmp_path / "work"
    (work / "w.py").write_text(METRICS_WRITER)
    flag = ["--metrics-path", metrics_path] if metrics_path else []
    run = subprocess.run(
        [*cmd, "run", "-s", "slurm", "--wait", *flag, "dist.ddp", "--nproc", "2", "w.py"],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    handle = run.stdout.strip().splitlines()[0]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shown = subprocess.run(
        [*cmd, "metrics", handle, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=elsewhere,
    )
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert {r: (v["step"], v["loss"]) for r, v in doc["latest"].items()} == {
        "0": (5, 1.0),
        "1": (5, 2.0),
    }
    home = Path(os.environ[settings.HOME])
    # a relative path is relative to the ranks' working directory: by default (snapshot on)
    # the copy of the submission directory inside the job's directory
    job = handle.rsplit("/", 1)[1]
    expected = home / "slurm" / "jobs" / job / "snapshot" / "rel-metrics" if metrics_path else home
    assert doc["path"].startswith(str(expected)), doc["path"]
