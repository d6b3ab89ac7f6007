"""`run` starts the app's supervisor while it still builds the app (schedulers/local/launch.py):
the supervisor it did not use never outlives it, and one that died is replaced."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI, processes_with_env, wait_until
from trainlaunch.runner import get_runner
from trainlaunch.schedulers.local.launch import APP_FROM_FD, WarmSupervisor, warm_supervisor


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


def _cgroup_of(warm: WarmSupervisor) -> str:
    """Where a warm supervisor makes its cgroup (node/appgroup.py), read while it runs."""
    from trainlaunch.node import appgroup

    path = appgroup._path(appgroup.supervisor_name(warm.proc.pid))
    if path is None or not os.access(os.path.dirname(path), os.W_OK):
        pytest.skip("this user may make no cgroup here (no cgroup v2 or no delegation)")
    return path


def test_a_warm_supervisor_given_no_app_exits_by_itself() -> None:
    """Its starter died without handing it an app (the pipe's end-of-file): exit 0, nothing
    written and no cgroup left, as a CLI killed by SIGKILL leaves it."""
    warm = warm_supervisor()
    assert warm is not None
    cgroup = _cgroup_of(warm)
    os.close(warm.pipe)
    assert warm.proc.wait(timeout=120) == 0
    assert not os.path.exists(cgroup)


def test_a_stopped_warm_supervisor_leaves_no_cgroup() -> None:
    """Stopped by SIGKILL at once (still importing) or once it waits in its cgroup: its
    starter removes the cgroup it may have made."""
    for wait_for_cgroup in (False, True):
        warm = warm_supervisor()
        assert warm is not None
        cgroup = _cgroup_of(warm)
        if wait_for_cgroup:
            wait_until(lambda c=cgroup: os.path.isdir(c), timeout=60, what="its cgroup")
        warm.discard()
        assert not os.path.exists(cgroup)


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


PREFETCH_CASES: list[tuple[list[str], dict[str, str], bool]] = [
    (["run", "utils.echo"], {}, True),
    (["--debug", "run", "--wait", "dist.ddp", "train.py"], {}, True),
    (["run", "-s", "local", "utils.echo"], {}, True),
    (["run", "-s", "slurm", "utils.echo"], {}, False),
    (["run", "--scheduler=kubernetes", "utils.echo"], {}, False),
    (["run", "-sslurm", "utils.echo"], {}, False),
    (["run", "utils.echo"], {"TRAINLAUNCH_SCHEDULER": "slurm"}, False),
    (["run", "-s", "local", "utils.echo"], {"TRAINLAUNCH_SCHEDULER": "slurm"}, True),
    (["run", "--dryrun", "utils.echo"], {}, False),
    (["run", "--help"], {}, False),
    (["run", "utils.echo", "--help"], {}, True),  # the component's: the CLI drops it
    (["run", "utils.echo", "--dryrun"], {}, True),  # the component's argument, not run's
    (["status", "local://x/y"], {}, False),
    ([], {}, False),
]


def test_which_command_lines_prefetch_a_supervisor() -> None:
    """trainlaunch/__main__.py's reading of argv (in an interpreter of its own: importing
    __main__ installs the CLI's signal handlers)."""
    code = (
        "import json, sys\n"
        "from trainlaunch.__main__ import local_run\n"
        "cases = json.loads(sys.stdin.read())\n"
        "print(json.dumps([local_run(argv, env) for argv, env, _ in cases]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(PREFETCH_CASES),
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(out.stdout)
    assert [(c[0], c[1], g) for c, g in zip(PREFETCH_CASES, got, strict=True)] == PREFETCH_CASES


def test_a_prefetched_supervisor_no_run_took_is_gone_when_the_cli_exits(cli: CLI) -> None:
    """`run` on the local backend per argv, sent to Kubernetes by the config file: the
    prefetched supervisor is stopped before the CLI exits (the submission itself fails: no
    cluster is configured here)."""
    config = cli.cwd / "elsewhere.toml"
    config.write_text('[run]\nscheduler = "kubernetes"\n')
    env = {"TRAINLAUNCH_CONFIG": str(config), "KUBECONFIG": str(cli.cwd / "no-such-kubeconfig")}
    out = cli("run", "utils.echo", "--msg", "x", env=env)
    assert out.returncode != 0 and "kube" in out.stderr.lower(), out
    assert processes_with_env("TRAINLAUNCH_HOME", str(cli.home)) == []


def test_run_hands_its_app_to_the_supervisor_it_started_first(cli: CLI) -> None:
    """The app's supervisor is the warm one (its command line says so), and the app runs."""
    handle = cli.run("utils.sh", "sleep 60")
    try:
        app_dir = cli.home / "apps" / handle.rsplit("/", 1)[1]
        pid = json.loads((app_dir / "supervisor.json").read_text())["pid"]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert APP_FROM_FD.encode() in cmdline
        assert cli.status(handle)["state"] in ("SUBMITTED", "PENDING", "RUNNING")
    finally:
        cli("stop", handle, check=True)
    assert cli.wait(handle)["state"] == "CANCELLED"
