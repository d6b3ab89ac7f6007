"""Hang options where they are checked: Slurm rendering and the Kubernetes refusal."""

from __future__ import annotations

import pytest

from trainlaunch import settings
from trainlaunch.errors import SchedulerError, UsageError
from trainlaunch.schedulers.slurm.render import render_script, slurm_runopts
from trainlaunch.specs import AppDef, Role

DDP = Role(
    name="trainer",
    entrypoint="/venv/bin/python",
    args=("-m", "trainlaunch.agent", "--nnodes", "2", "train.py"),
    node_agent=True,  # what dist.ddp sets: the request says it runs the agent
    num_replicas=2,
    max_retries=2,
)


def script(app: AppDef, **cfg: object) -> str:
    resolved = slurm_runopts().resolve(cfg, "slurm")
    return render_script(app, resolved, "trainlaunch", "/jobs/${app_id}")


def test_without_hang_timeout_the_script_has_no_watchdog() -> None:
    assert "watchdog" not in script(AppDef("train", (DDP,)))


def test_hang_timeout_starts_the_watchdog_next_to_the_batch_script() -> None:
    text = script(AppDef("train", (DDP,)), hang_timeout=600, on_hang="restart")
    assert f'export {settings.HEARTBEAT_PATH}="$trainlaunch_job_dir"/heartbeat/rank{{rank}}' in text
    assert (
        '( exec /venv/bin/python -m trainlaunch.schedulers.slurm.watchdog "$trainlaunch_job_dir" '
        '600.0 restart 2 $$ >>"$trainlaunch_job_dir/watchdog.log" 2>&1 & )'
    ) in text
    # before the first srun, so it watches from the start
    assert text.index("slurm.watchdog") < text.index("srun ")


def test_hang_options_need_a_ddp_role_and_a_known_action() -> None:
    plain = Role(name="echo", entrypoint="echo", args=("hi",))
    with pytest.raises(UsageError, match="needs a dist.ddp role"):
        script(AppDef("echo", (plain,)), hang_timeout=60)
    with pytest.raises(UsageError, match="on_hang must be one of none, stop, restart"):
        script(AppDef("train", (DDP,)), hang_timeout=60, on_hang="reboot")


def test_kubernetes_says_in_one_line_why_stack_is_not_supported() -> None:
    from trainlaunch.schedulers.kubernetes.backend import create_scheduler

    with pytest.raises(SchedulerError, match="not supported on kubernetes yet: py-spy") as e:
        create_scheduler("trainlaunch").stacks("default:app-1")
    assert "\n" not in e.value.message and "SYS_PTRACE" in (e.value.hint or "")
