"""`run` starts the app's supervisor while it still builds the app (schedulers/local/launch.py):
the supervisor it did not use never outlives it, and one that died is replaced."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.conftest import CLI, processes_with_env
from trainlaunch.runner import get_runner
from trainlaunch.schedulers.local.launch import APP_FROM_FD, warm_supervisor


def _warm_children() -> list[int]:
    """This process's children that are warm supervisors still waiting for an app."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and APP_FROM_FD.encode() in cmdline:
            found.append(int(entry))
    return found


def test_a_run_that_fails_leaves_no_process_behind(cli: CLI) -> None:
    """The component's arguments are wrong: the warm supervisor is stopped and reaped before
    the command exits (no `sleep`: it is gone when the CLI's exit code is known)."""
    bad = cli("run", "utils.echo", "--no-such-flag")
    assert bad.returncode == 2, bad.stderr
    assert "unknown option --no-such-flag" in bad.stderr
    assert processes_with_env("TRAINLAUNCH_HOME", str(cli.home)) == []
    assert not (cli.home / "apps").exists() or not any((cli.home / "apps").iterdir())


def test_a_warm_supervisor_given_no_app_exits_by_itself() -> None:
    """Its starter died without handing it an app (the pipe's end-of-file): exit 0, nothing
    written, as a CLI killed by SIGKILL leaves it."""
    warm = warm_supervisor()
    assert warm is not None
    os.close(warm.pipe)
    assert warm.proc.wait(timeout=120) == 0


def test_an_app_handed_to_a_dead_warm_supervisor_gets_one_of_its_own(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "TRAINLAUNCH_HOME": str(home)}
    with get_runner(environ=env) as runner:
        runner.warm_up("local")
        (dead,) = _warm_children()
        os.kill(dead, signal.SIGKILL)
        os.waitpid(dead, 0)  # reaped here: its pid cannot be the app's supervisor's
        handle = runner.run_component("utils.echo", ["--msg", "hi"], "local")
        final = runner.wait(handle, wait_interval=0.1, timeout=120)
        assert final is not None and final.state.name == "SUCCEEDED"
        supervisor = (home / "apps" / handle.rsplit("/", 1)[1] / "supervisor.json").read_text()
        assert f'"pid":{dead},' not in supervisor.replace(" ", "")
    assert _warm_children() == []


def test_warm_up_never_fails_on_a_scheduler_it_cannot_have() -> None:
    with get_runner() as runner:
        runner.warm_up("no-such-scheduler")  # the submission says what is wrong, not this
        assert _warm_children() == []
