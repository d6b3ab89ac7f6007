"""Slurm rendering: golden batch scripts, option checks, and what dryrun promises."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from trainlaunch import settings
from trainlaunch.errors import UsageError
from trainlaunch.schedulers import get_scheduler
from trainlaunch.schedulers.slurm.backend import SlurmScheduler
from trainlaunch.schedulers.slurm.render import shell_word, slurm_runopts
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
