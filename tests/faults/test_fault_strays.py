"""A process that left the app's process group (`setsid`) is stopped on every path (issue 23 #9).

`stop` used to look for such processes (by the app id in their environment) only when the
supervisor had died: with the supervisor alive, and after an app that ended on its own, a
`setsid` daemon ran on. Now the supervisor stops them too (at the app's end, before a
requeue or restart), by one rule (node/appgroup.py): the members of the app's cgroup where
this user may make one, else the processes whose environment carries its TRAINLAUNCH_APP_ID.
Both mechanisms are tried for real: the environment by starting the app in a mount namespace
where the cgroup v2 hierarchy is read-only (root only), so the supervisor cannot make one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI, pids_alive, wait_until
from tests.faults.fault_helpers import (
    app_dir,
    app_processes,
    kill9,
    running_replicas,
    supervisor_pid,
)
from trainlaunch.node import appgroup

DAEMON = "setsid sleep 300 & "  # a session (and process group) of its own, as a daemon makes
MECHANISMS = [appgroup.CGROUP, appgroup.ENVIRONMENT]


def _cgroup2_mount() -> str | None:
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[fields.index("-") + 1] == "cgroup2":
                return fields[4]
    return None


def _run(cli: CLI, mechanism: str, command: str) -> str:
    """`run utils.sh COMMAND`; for the environment, with the cgroup hierarchy read-only."""
    argv = [sys.executable, "-m", "trainlaunch", "run", "utils.sh", command]
    if mechanism == appgroup.ENVIRONMENT:
        mount = _cgroup2_mount()
        if os.geteuid() != 0 or mount is None:
            pytest.skip("hiding the cgroup hierarchy needs root and cgroup v2")
        hide = 'mount -o remount,bind,ro "$1" && shift && exec "$@"'
        argv = ["unshare", "--mount", "sh", "-c", hide, "sh", mount, *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, env=cli.env, cwd=cli.cwd)
    assert proc.returncode == 0, proc.stderr
    handle = proc.stdout.strip()
    recorded = _state(cli, handle).get("cgroup")
    if mechanism == appgroup.CGROUP and recorded is None:
        pytest.skip("this machine gives this user no cgroup (no cgroup v2 or no delegation)")
    assert (recorded is None) == (mechanism == appgroup.ENVIRONMENT), recorded
    return handle


def _state(cli: CLI, handle: str) -> dict:
    path = app_dir(cli, handle) / "state.json"
    return wait_until(lambda: path.exists() and json.loads(path.read_text()), what="state.json")


def _daemon(handle: str) -> int:
    """The app's process that leads a session of its own (the setsid sleep)."""

    def found() -> int | None:
        for pid in app_processes(handle):
            try:
                if os.getsid(pid) == pid and Path(f"/proc/{pid}/comm").read_text() == "sleep\n":
                    return pid
            except OSError:
                continue
        return None

    return wait_until(found, what="the app's setsid daemon")


def _said(mechanism: str) -> str:
    return appgroup.said(1, mechanism)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_stop_stops_a_setsid_process_while_the_supervisor_lives(cli: CLI, mechanism: str) -> None:
    handle = _run(cli, mechanism, DAEMON + "sleep 300")
    daemon = _daemon(handle)
    proc = cli("stop", handle)
    assert proc.returncode == 0, proc.stderr
    assert _said(mechanism) in proc.stderr, proc.stderr
    assert pids_alive([daemon]) == [], "the setsid daemon outlived `stop`"
    assert app_processes(handle) == []
    st = cli.status(handle)
    assert st["state"] == "CANCELLED" and _said(mechanism) in st["msg"], st


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_daemon_left_by_an_app_that_ended_is_stopped(cli: CLI, mechanism: str) -> None:
    # the replica ends once its child has its own session (a straggler still in the
    # replica's group is killed with it, as before: that is not this case)
    settled = 'until [ "$(cut -d" " -f6 /proc/$!/stat)" = "$!" ]; do :; done; echo done'
    handle = _run(cli, mechanism, DAEMON + settled)
    final = cli.wait(handle)
    assert final["state"] == "SUCCEEDED", final
    assert _said(mechanism) in final["msg"], final["msg"]
    assert app_processes(handle) == [], "a daemon outlived the app"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_stop_after_the_supervisor_died_stops_the_setsid_process(cli: CLI, mechanism: str) -> None:
    handle = _run(cli, mechanism, DAEMON + "sleep 300")
    daemon = _daemon(handle)
    running_replicas(cli, handle, 1)  # recorded: the replica is told apart from the daemon
    cgroup = _state(cli, handle).get("cgroup")
    kill9(supervisor_pid(cli, handle))
    proc = cli("stop", handle)
    assert proc.returncode == 0, proc.stderr
    assert _said(mechanism) in proc.stderr, proc.stderr
    assert pids_alive([daemon]) == [] and app_processes(handle) == []
    assert cli.status(handle)["state"] == "CANCELLED"
    assert cgroup is None or not os.path.exists(cgroup), "the app's cgroup was left behind"
