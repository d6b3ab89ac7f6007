"""Slurm rendering: golden batch scripts, option checks, and what dryrun promises."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from components.utils import python
from tests.conftest import InProcessCLI
from trainlaunch import settings
from trainlaunch.errors import UsageError
from trainlaunch.schedulers import get_scheduler
from trainlaunch.schedulers.slurm.backend import SlurmScheduler
from trainlaunch.schedulers.slurm.render import render_script, shell_word, slurm_runopts
from trainlaunch.specs import AppDef, Resource, Role

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "slurm"
HOME = "/home/alice/.local/state/trainlaunch"
NODE_PYTHON = "/usr/bin/python3"  # stands for sys.executable in the golden scripts
TORTURE = (
    "two words",
    "it's",
    'say "hi"',
    "$(touch /tmp/pwned)",
    "`id`",
    "line1\nline2",
    "naïve ☃ 日本",
    "$HOME ${HOME}",
    "back\\slash",
    "",
    "*",
    "--id=${app_id}/${replica_id}",
    "EOF_ROLE_0",
    "a=b",
    "tab\there",
    "~",
    "!!",
    "#not a comment",
)


def scheduler() -> SlurmScheduler:
    return get_scheduler("slurm", "trainlaunch", environ={settings.HOME: HOME})


def injected(app: AppDef, seed: int = 7) -> AppDef:
    """What the Runner hands a backend: the rank settings and identity in every role's env."""
    rs = settings.RankSettings(seed=seed, metrics_path=scheduler().default_metrics_path({}))
    return settings.inject(app, rs, "slurm://trainlaunch/")


def ddp_role(nnodes: int = 2, nproc: int = 2) -> Role:
    """The shape of dist.ddp's role: one agent per node."""
    return Role(
        "trainer",
        "python3",
        (
            "-m",
            "trainlaunch.agent",
            "--nnodes",
            str(nnodes),
            "--nproc-per-node",
            str(nproc),
            "train.py",
            "--lr",
            "0.1",
        ),
        num_replicas=nnodes,
        resource=Resource(cpu=nproc, gpu=0, memMB=4096),
    )


CASES: dict[str, tuple[AppDef, dict]] = {
    "echo": (injected(AppDef("echo", [Role("echo", "echo", ("hello world",))])), {}),
    "echo_two_replicas_job_dir": (
        AppDef("echo", [Role("echo", "echo", ("hi",), num_replicas=2)]),
        {"job_dir": "/shared/scratch/${app_id}"},
    ),
    "hetjob_two_roles": (
        injected(
            AppDef(
                "pipeline",
                [
                    Role(
                        "trainer",
                        "python3",
                        ("train.py",),
                        num_replicas=2,
                        resource=Resource(cpu=4, gpu=1, memMB=8192),
                    ),
                    Role(
                        "reader",
                        "python3",
                        ("read.py", "--host", "${rank0_env}"),
                        resource=Resource(cpu=2, memMB=2048),
                    ),
                ],
            )
        ),
        {"partition": "batch", "time": "1:00:00"},
    ),
    "ddp_two_nodes": (injected(AppDef("train", [ddp_role()])), {}),
    "every_option": (
        AppDef(
            "train",
            [ddp_role(4, 8).replace(max_retries=3, resource=Resource(cpu=8, gpu=8, memMB=100))],
        ),
        {
            "partition": "gpu",
            "account": "proj-42",
            "qos": "high",
            "time": "2-00:00:00",
            "constraint": "a100&ib",
            "comment": 'nightly "run" #3',
            "mail_user": "me@example.com",
            "mail_type": "END,FAIL",
            "exclusive": True,
            "ntasks_per_node": 2,
            "cpus_per_task": 6,
            "mem": "0",
            "gpus_per_node": 4,
            "gpu_type": "a100",
            "signal": "SIGUSR2@300",
            "rdzv_port": 29400,
            "job_dir": "/scratch/my jobs/%run-${app_id}",
            "extra": ["--reservation=maint", "--nice=10"],
        },
    ),
    "quoting_torture": (
        AppDef(
            "torture",
            [
                Role(
                    "t",
                    "python3",
                    ("-c", "import sys; print(sys.argv)", *TORTURE),
                    env={
                        "ODD": TORTURE[3] + TORTURE[5] + TORTURE[6],
                        "EMPTY": "",
                        "APP": "job-${app_id}",
                    },
                )
            ],
        ),
        {"job_dir": "/shared/${app_id}", "signal": "none", "mem": "omit"},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str) -> None:
    app, cfg = CASES[case]
    text = str(scheduler().submit_dryrun(app, {"snapshot": "off", **cfg}))  # cwd-independent
    # the replica runner's python (no node agent): the one running the tests, machine-specific
    text = text.replace(shell_word(sys.executable), NODE_PYTHON)
    path = GOLDEN / f"{case}.sh"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), (
        f"rerun with UPDATE_GOLDEN=1 and review the diff of {path}"
    )


def test_dryrun_is_the_request_and_leaves_the_app_alone() -> None:
    app, cfg = CASES["hetjob_two_roles"]
    before = app.to_dict()
    info = scheduler().submit_dryrun(app, cfg)
    assert str(info) == info.request.script and info.scheduler == "slurm"
    assert info.request.job_dir == f"{HOME}/slurm/jobs/${{app_id}}"
    assert app.to_dict() == before
    assert info.cfg["signal"] == "USR1@90" and info.cfg["ntasks_per_node"] == 1


def test_default_paths_live_under_the_trainlaunch_home() -> None:
    s = scheduler()
    assert s.default_metrics_path({}) == f"{HOME}/slurm/jobs/${{app_id}}/metrics/"
    assert s.default_metrics_path({"job_dir": "/x/${app_id}"}) == "/x/${app_id}/metrics/"


def test_relative_job_dir_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    info = scheduler().submit_dryrun(CASES["echo"][0], {"job_dir": "jobs/${app_id}"})
    assert info.request.job_dir == f"{tmp_path}/jobs/${{app_id}}"


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"partiton": "x"}, "did you mean 'partition'"),
        ({"time": "ten minutes"}, "option 'time': expected MINUTES"),
        ({"signal": "USR1@@9"}, "option 'signal'"),
        ({"signal": "B:USR1@60"}, "B: would signal only the batch shell"),
        ({"mail_type": "END,SOMETIMES"}, "unknown type 'SOMETIMES'"),
        ({"mem": "lots"}, "option 'mem'"),
        ({"comment": "two\nlines"}, "must not contain control characters"),
        ({"extra": ["reservation=x"]}, "starting with '-'"),
        ({"ntasks_per_node": 0}, "'ntasks_per_node' must be >= 1"),
        ({"rdzv_port": 70000}, "TCP port"),
        ({"job_dir": "/a\nb"}, "control characters"),
    ],
)
def test_bad_options_are_usage_errors(cfg: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message) as e:
        scheduler().submit_dryrun(CASES["echo"][0], cfg)
    assert "\n" not in str(e.value).split(":")[0]


def test_unknown_option_lists_the_valid_ones() -> None:
    with pytest.raises(UsageError) as e:
        slurm_runopts().resolve({"nodes": 3}, "slurm")
    assert "valid options: account, comment, constraint" in str(e.value)


@pytest.mark.parametrize(
    ("role", "message"),
    [
        (Role("r", "echo", env={"NOT-A-NAME": "x"}), "not a shell variable name"),
        (Role("r", "echo", ("a\0b",)), "cannot contain NUL"),
    ],
)
def test_unrenderable_roles_are_usage_errors(role: Role, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        scheduler().submit_dryrun(AppDef("x", [role]), {})


def test_heredoc_terminator_never_appears_as_a_line() -> None:
    app = AppDef("x", [Role("r", "echo", ("a\nEOF_ROLE_0\nb",))])
    script = str(scheduler().submit_dryrun(app, {}))
    assert "<<'EOF_ROLE_0_'" in script
    assert script.count("\nEOF_ROLE_0_\n") == 1


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("plain", "plain"),
        ("", "''"),
        ("a b", "'a b'"),
        ("it's", "'it'\"'\"'s'"),
        ("\x01APP_ID\x01", '"$SLURM_JOB_ID"'),
        ("x\x01REPLICA_ID\x01y", 'x"$SLURM_PROCID"y'),
    ],
)
def test_shell_word(text: str, word: str) -> None:
    assert shell_word(text) == word


def test_reserved_words_and_assignments_are_never_bare_commands() -> None:
    for entrypoint in ("time", "if", "A=b"):
        script = str(scheduler().submit_dryrun(AppDef("x", [Role("r", entrypoint)]), {}))
        assert f"\ntrainlaunch_cmd=('{entrypoint}')\n" in script


def test_one_memory_default_for_every_component_not_set() -> None:
    # issue 22 #11: specs.Resource's 1 GiB went into every user component's script as --mem,
    # where dist.ddp asked for none; one default for all: not set (the cluster's)
    assert Resource().memMB == 0 and Resource.from_dict({}).memMB == 0
    user = AppDef("mine", [Role("train", "python3", ("train.py",), num_replicas=2)])
    builtin = python("-c", "pass")
    for app in (user, builtin):
        script = str(scheduler().submit_dryrun(app, {"snapshot": "off"}))
        assert "--mem" not in script, script
    asked = AppDef("mine", [Role("train", "python3", resource=Resource(memMB=2048))])
    assert "#SBATCH --mem=2048M" in str(scheduler().submit_dryrun(asked, {"snapshot": "off"}))


def test_an_argument_no_exec_could_take_is_refused_when_rendered() -> None:
    """Issue 23 #21: over the kernel's limit for one argument (128 KiB with its NUL), the job
    would fail on the node (`Argument list too long`, 126); 100 KB is fine (tests/slurm)."""
    at_limit = Role("long", "echo", ("x" * (128 * 1024 - 1),))
    scheduler().submit_dryrun(AppDef("long", [at_limit]), {"snapshot": "off"})
    over = Role("long", "echo", ("short", "x" * (128 * 1024)))
    with pytest.raises(UsageError, match=r"argument 2 of role 'long' is 131072 bytes"):
        scheduler().submit_dryrun(AppDef("long", [over]), {"snapshot": "off"})
    env = Role("long", "echo", (), env={"BIG": "x" * (128 * 1024)})
    with pytest.raises(UsageError, match=r"env BIG of role 'long' is 131076 bytes"):
        scheduler().submit_dryrun(AppDef("long", [env]), {"snapshot": "off"})


def test_dryrun_shows_the_replica_script_with_secrets_masked(inprocess_cli: InProcessCLI) -> None:
    """Issue 23 #2: the replica script now reaches its tasks as a file, and the dry run still
    shows it (in the batch script's here-document), secrets masked by the one rule."""
    env = {"HF_TOKEN": "tok-" + "3a" * 12, "DATABASE_URL": "postgres://u:pw-" + "5c" * 8 + "@h/x"}
    proc = inprocess_cli(
        "run", "-s", "slurm", "--dryrun", "--no-snapshot", "utils.sh",
        "--env", ",".join(f"{k}={v}" for k, v in env.items()), "--", "echo hi",
        check=True,
    )  # fmt: skip
    assert "export HF_TOKEN=********" in proc.stdout
    assert "export DATABASE_URL=********" in proc.stdout
    assert "trainlaunch_cmd=(bash -c 'echo hi')" in proc.stdout  # what runs is shown
    assert 'bash "$trainlaunch_job_dir/.role0.sh" &' in proc.stdout  # and how it runs
    assert not any(v in proc.stdout + proc.stderr for v in env.values())
    assert "pw-" + "5c" * 8 not in proc.stdout


@pytest.mark.parametrize("role", ["metrics", "snapshot", "attempts", "result", "hang-3.json"])
def test_a_role_named_as_a_job_dir_entry_is_refused(role: str) -> None:
    # a script named metrics.py names its role "metrics": its replicas' directory
    # <job dir>/metrics/0 would be the job's metrics directory
    app = AppDef("a", roles=(Role(name=role, image="/", entrypoint="true"),))
    with pytest.raises(UsageError, match=f"role name '{role}' is taken on Slurm") as e:
        render_script(app, slurm_runopts().resolve({}, "slurm"), "s", "/jobs/${app_id}")
    assert e.value.hint is not None and "--name APP/ROLE" in e.value.hint
    fine = AppDef("a", roles=(Role(name=f"{role}x", image="/", entrypoint="true"),))
    assert render_script(fine, slurm_runopts().resolve({}, "slurm"), "s", "/jobs/${app_id}")
