"""The rendered batch script, run by bash with fake srun/scontrol (no cluster needed).

The fakes stand at the process boundary: srun runs its command once per task with
SLURM_PROCID set, scontrol answers `show hostnames` and records `requeue`. This proves the
quoting byte for byte, including arguments no fixed list would think of (hypothesis).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from trainlaunch import settings
from trainlaunch.schedulers import get_scheduler
from trainlaunch.schedulers.slurm.status import JobInfo, app_status, read_kv
from trainlaunch.specs import AppDef, AppState, Role, macros

JOB_ID = "4242"
FAKE_SRUN = r"""#!/bin/bash
# srun [--opt=...]... CMD...: CMD once per task (own session), SIGTERM stops every task
printf '%s\0' srun "$@" >>"${FAKE_SRUN_ARGV:-/dev/null}"  # its command line, as ps shows it
ntasks=1
while [[ $1 == --* ]]; do [[ $1 == --ntasks=* ]] && ntasks=${1#*=}; shift; done
pids=()
for ((i = 0; i < ntasks; i++)); do
    SLURM_PROCID=$i SLURMD_NODENAME=node$i setsid "$@" &
    pids+=($!)
done
trap 'for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done' TERM
rc=0
for p in "${pids[@]}"; do wait "$p"; r=$?; ((r > rc)) && rc=$r; done
exit $rc
"""
FAKE_SCONTROL = """#!/bin/bash
case $1 in
  show) echo node0; echo node1 ;;
  requeue) echo "$2" >>"$FAKE_REQUEUES" ;;
esac
"""
DUMP = r"""#!/bin/bash
# the entrypoint: write argv and some env, NUL-separated, into the replica's log dir
if [ $# -gt 0 ]; then printf '%s\0' "$@"; fi >"$TRAINLAUNCH_REPLICA_LOG_DIR/argv"
for k in ODD EMPTY TRAINLAUNCH_APP_ID TRAINLAUNCH_REPLICA_ID TRAINLAUNCH_RANK0_HOST \
         TRAINLAUNCH_RDZV_PORT TRAINLAUNCH_REPLICA_LOG_DIR TRAINLAUNCH_SEED; do
    printf '%s=%s\0' "$k" "${!k-<unset>}"
done >"$TRAINLAUNCH_REPLICA_LOG_DIR/env"
"""


@pytest.fixture(scope="module")
def fakes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bin_dir = tmp_path_factory.mktemp("fake-slurm-bin")
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL), ("dump", DUMP)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def run_batch(
    app: AppDef, tmp: Path, fakes: Path, cfg: dict | None = None
) -> subprocess.CompletedProcess[str]:
    """Render app and run the script as Slurm would run it on the batch host."""
    sched = get_scheduler("slurm", "trainlaunch", environ={settings.HOME: str(tmp / "home")})
    job_dir_template = str(tmp / "jobs" / "${app_id}")
    script = str(
        sched.submit_dryrun(app, {"job_dir": job_dir_template, "snapshot": "off", **(cfg or {})})
    )
    (tmp / "jobs" / JOB_ID).mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": f"{fakes}:{os.environ['PATH']}",
        "SLURM_JOB_ID": JOB_ID,
        "SLURM_JOB_NODELIST": "node[0-1]",
        "FAKE_REQUEUES": str(tmp / "requeues"),
        "FAKE_SRUN_ARGV": str(tmp / "srun-argv"),
        "HOME": os.environ.get("HOME", "/root"),
    }
    return subprocess.run(
        ["bash", "-s"], input=script, env=env, capture_output=True, text=True, timeout=60
    )


def dumped(tmp: Path, role: str, k: int) -> tuple[list[str], dict[str, str]]:
    """What the dump entrypoint of replica k received: (argv, env)."""
    d = tmp / "jobs" / JOB_ID / role / str(k)
    argv = (d / "argv").read_bytes().decode().split("\0")[:-1]
    env = dict(kv.split("=", 1) for kv in (d / "env").read_bytes().decode().split("\0")[:-1])
    return argv, env


def replica_output(tmp: Path, role: str, k: int) -> str:
    return (tmp / "jobs" / JOB_ID / role / str(k) / "stdout.log").read_text(encoding="utf-8")


TORTURE = [
    "two words",
    "it's",
    'say "hi"',
    "$(touch pwned)",
    "`touch pwned`",
    "line1\nline2",
    "naïve ☃ 日本",
    "$HOME ${HOME} $1 $@",
    "back\\slash\\",
    "",
    "*",
    "?",
    "[a]",
    "~",
    "!!",
    "#x",
    "a=b",
    "-",
    "--",
    "'",
    '"',
    "\t",
    "\r",
    " ",
    ";",
    "|",
    "&",
    "EOF_ROLE_0",
    "<<'EOF'",
    "EOF",
    "%j %%",
    "\\\n",
]


def test_torture_arguments_and_env_arrive_byte_for_byte(tmp_path: Path, fakes: Path) -> None:
    odd = "".join(TORTURE)
    role = Role(
        "t",
        str(fakes / "dump"),
        (*TORTURE, "--id=${app_id}/${replica_id}"),
        num_replicas=2,
        env={"ODD": odd, "EMPTY": ""},
    )
    proc = run_batch(AppDef("torture", [role]), tmp_path, fakes)
    assert proc.returncode == 0, proc.stderr
    ports = set()
    for k in (0, 1):
        argv, env = dumped(tmp_path, "t", k)
        assert argv == [*TORTURE, f"--id={JOB_ID}/{k}"]
        assert env["ODD"] == odd and env["EMPTY"] == ""
        assert env["TRAINLAUNCH_APP_ID"] == JOB_ID and env["TRAINLAUNCH_REPLICA_ID"] == str(k)
        assert env["TRAINLAUNCH_RANK0_HOST"] == "node0"
        ports.add(env["TRAINLAUNCH_RDZV_PORT"])
        assert env["TRAINLAUNCH_REPLICA_LOG_DIR"] == str(tmp_path / "jobs" / JOB_ID / "t" / str(k))
    assert not list(tmp_path.rglob("pwned")) and not Path("pwned").exists()
    # one rendezvous port for every replica: a free one the batch host chose, not the job id's
    (port,) = ports
    assert port.isdigit() and 0 < int(port) < 65536, port
    assert int(port) != 20000 + int(JOB_ID) % 10000


def test_secrets_and_a_100kb_argument_reach_the_replicas_but_no_command_line(
    tmp_path: Path, fakes: Path
) -> None:
    """Issue 23 #2, #21: the replica script reaches srun's tasks as a 0600 file; before, it
    was srun's argument (`bash -c BODY`): public, and over 128 KiB an exec error (126)."""
    import random

    rng = random.Random(21)
    long = "".join(rng.choice("abcdefghij c'\"$`\\\n;|&*日本☃") for _ in range(100_000))
    assert 100_000 < len(long.encode()) < 128 * 1024  # what one exec argument may be
    env = {"HF_TOKEN": "tok-" + "9f" * 12, "DATABASE_URL": "postgres://u:pw-" + "7e" * 8 + "@h/db"}
    role = Role("t", str(fakes / "dump"), (long,), num_replicas=2, env={**env, "ODD": long})
    proc = run_batch(AppDef("long", [role]), tmp_path, fakes)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for k in (0, 1):
        argv, got = dumped(tmp_path, "t", k)
        assert argv == [long] and got["ODD"] == long
    srun_argv = (tmp_path / "srun-argv").read_bytes().decode()
    assert srun_argv.count("srun\0") == 1 and len(srun_argv) < 1000, srun_argv[:300]
    assert not any(v in srun_argv for v in env.values())
    body = tmp_path / "jobs" / JOB_ID / ".role0.sh"
    assert (body.stat().st_mode & 0o777) == 0o600 and env["HF_TOKEN"] in body.read_text()


_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=40)


@hsettings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(args=st.lists(_TEXT, max_size=4), value=_TEXT)
def test_any_text_arrives_as_the_macros_define_it(
    tmp_path_factory: pytest.TempPathFactory, fakes: Path, args: list[str], value: str
) -> None:
    tmp = tmp_path_factory.mktemp("any")
    role = Role("t", str(fakes / "dump"), tuple(args), env={"ODD": value})
    proc = run_batch(AppDef("any", [role]), tmp, fakes)
    assert proc.returncode == 0, proc.stderr
    argv, env = dumped(tmp, "t", 0)

    # the oracle is the real substitution (macros.Values), not string.Template: the macro
    # contract has no $$ escape (Template would turn "$$" into "$")
    values = macros.Values(
        img_root="", app_id=JOB_ID, replica_id="0", rank0_env=settings.RANK0_HOST
    )
    assert argv == [values.substitute(a) for a in args]
    assert env["ODD"] == values.substitute(value)


# (given, what the replica receives): only the four ${name} macros change; "$$" and unknown
# ${...} stay as they are. Pinned literally, independent of any substitution code.
DOLLARS = [
    ("a$$b", "a$$b"),
    ("$$", "$$"),
    ("${app_id}-$$", f"{JOB_ID}-$$"),
    ("$${app_id}", f"${JOB_ID}"),
    ("$${replica_id}$$", "$0$$"),
    ("${nope} $HOME", "${nope} $HOME"),
]


def test_dollar_dollar_is_not_an_escape(tmp_path: Path, fakes: Path) -> None:
    given = tuple(g for g, _ in DOLLARS)
    role = Role("t", str(fakes / "dump"), given, env={"ODD": "$$${app_id}$$"})
    proc = run_batch(AppDef("dollars", [role]), tmp_path, fakes)
    assert proc.returncode == 0, proc.stderr
    argv, env = dumped(tmp_path, "t", 0)
    assert argv == [want for _, want in DOLLARS]
    assert env["ODD"] == f"$${JOB_ID}$$"


def test_runner_injection_reaches_every_replica(tmp_path: Path, fakes: Path) -> None:
    app = AppDef("seed", [Role("t", str(fakes / "dump"), num_replicas=2)])
    app = settings.inject(app, settings.RankSettings(seed=99), "slurm://trainlaunch/")
    assert run_batch(app, tmp_path, fakes).returncode == 0
    for k in (0, 1):
        assert dumped(tmp_path, "t", k)[1]["TRAINLAUNCH_SEED"] == "99"


def test_records_and_status_of_a_failing_replica(tmp_path: Path, fakes: Path) -> None:
    role = Role(
        "t",
        "bash",
        ("-c", 'echo "boom $TRAINLAUNCH_REPLICA_ID" >&2; exit $((TRAINLAUNCH_REPLICA_ID * 7))'),
        num_replicas=2,
    )
    app = AppDef("fail", [role])
    proc = run_batch(app, tmp_path, fakes)
    assert proc.returncode == 7
    job_dir = tmp_path / "jobs" / JOB_ID
    result = read_kv(job_dir / "result") or {}
    assert (result["exit"], result["restart"]) == ("7", "0")
    assert read_kv(job_dir / "t" / "1" / "replica.status")["host"] == "node1"
    status = app_status(JobInfo(JOB_ID, "FAILED", exit_code=7, restarts=0), app, job_dir)
    assert status.state == AppState.FAILED and status.exit_code == 7
    r0, r1 = status.replicas()
    assert (r0.state, r0.exit_code) == (AppState.SUCCEEDED, 0)
    assert (r1.state, r1.exit_code, r1.hostname) == (AppState.FAILED, 7, "node1")
    assert r1.message == "boom 1" and status.structured_error_msg == "boom 1"
    assert "t/1 exited with 7 on node1" in status.msg


def test_a_failure_requeues_while_retries_are_left(tmp_path: Path, fakes: Path) -> None:
    app = AppDef("retry", [Role("t", "bash", ("-c", "exit 3"), max_retries=2)])
    proc = run_batch(app, tmp_path, fakes)
    assert proc.returncode == 3
    assert (tmp_path / "requeues").read_text() == f"{JOB_ID}\n"
    assert "requeueing (retry 1 of 2)" in proc.stdout
    history = (tmp_path / "jobs" / JOB_ID / "attempts").read_text().splitlines()
    assert history[0].startswith("attempt=0 start=") and " exit=3 action=retry term=0" in history[1]
    assert not (tmp_path / "jobs" / JOB_ID / "result").exists()  # not the end yet


def test_the_first_failing_role_stops_the_others(tmp_path: Path, fakes: Path) -> None:
    app = AppDef("het", [Role("slow", "sleep", ("30",)), Role("bad", "bash", ("-c", "exit 4"))])
    proc = run_batch(app, tmp_path, fakes)
    assert proc.returncode == 4, proc.stderr  # well before the sleeper's 30 s (timeout 60)


def test_the_time_limit_warning_spares_apps_that_do_not_handle_it(
    tmp_path: Path, fakes: Path
) -> None:
    handler = (
        "import os, signal; signal.signal(signal.SIGUSR1, lambda *a: print('warned')); "
        "os.kill(os.getpid(), signal.SIGUSR1); print('handled')"
    )
    app = AppDef(
        "sig",
        [
            Role("plain", "bash", ("-c", "kill -USR1 $$; echo survived")),
            Role("python", sys.executable, ("-c", handler)),
        ],
    )
    proc = run_batch(app, tmp_path, fakes)
    assert proc.returncode == 0, proc.stderr
    out = {
        r: (tmp_path / "jobs" / JOB_ID / r / "0" / "stdout.log").read_text()
        for r in ("plain", "python")
    }
    assert out == {"plain": "survived\n", "python": "warned\nhandled\n"}
