"""The machine reboots: every process is gone and the recorded boot id is another one.

Simulated for real: the app's processes are SIGKILLed and the boot id in supervisor.json and
state.json is rewritten. After that no app may show as RUNNING, and a pid that a record names
but that now belongs to an unrelated process (pid reuse) must never be signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CLI, pids_alive, wait_until
from tests.faults.fault_helpers import (
    app_dir,
    app_processes,
    kill9,
    read_record,
    running_replicas,
    start_ticks,
    supervisor_pid,
    wait_processes,
    write_record,
)


def _power_off(cli: CLI, handle: str) -> None:
    """Every process of the app dies at once, as at a power cut."""
    sup = supervisor_pid(cli, handle)
    os.kill(sup, signal.SIGKILL)
    for pid in app_processes(handle):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    kill9(sup)
    wait_until(lambda: app_processes(handle) == [], what="the app's processes to die")


def _rewrite(
    cli: CLI,
    handle: str,
    boot: str | None = None,
    pid: int | None = None,
    ticks: int | None | str = "keep",
) -> None:
    """Rewrite identity fields of supervisor.json and state.json (boot id, pids, ticks)."""
    d = app_dir(cli, handle)
    sup = read_record(d / "supervisor.json")
    state = read_record(d / "state.json")
    for rec in (sup, state["supervisor"]):
        if boot is not None:
            rec["boot_id"] = boot
        if pid is not None:
            rec["pid"] = pid
        if ticks != "keep":
            rec["ticks"] = ticks
    for r in state["replicas"]:
        if pid is not None:
            r["pid"] = r["pgid"] = pid
        if ticks != "keep":
            r["ticks"] = ticks
    write_record(d / "supervisor.json", sup)
    write_record(d / "state.json", state)


@pytest.fixture
def decoy() -> Iterator[int]:
    """An unrelated process (its own process group) that a stale record may come to name."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True
    )
    yield proc.pid
    proc.kill()
    proc.wait()


def test_reboot_leaves_no_app_running(reaper: CLI) -> None:
    cli = reaper
    done = cli.run("utils.echo", "--msg", "finished before the reboot")
    assert cli.wait(done)["state"] == "SUCCEEDED"
    one = cli.run("utils.sh", "sleep 300")
    two = cli.run("utils.sh", "--num-replicas", "2", "sleep 300 & wait")
    running_replicas(cli, one, 1)
    running_replicas(cli, two, 2)
    wait_processes(two, 4)
    other_boot = str(uuid.uuid4())
    for h in (one, two):
        _power_off(cli, h)
    for h in (done, one, two):
        _rewrite(cli, h, boot=other_boot)

    rows = {r["handle"]: r for r in json.loads(cli("list", "--json", check=True).stdout)}
    assert rows[done]["state"] == "SUCCEEDED"
    for h in (one, two):
        assert rows[h]["state"] == "FAILED", rows[h]
        assert "rebooted" in rows[h]["msg"], rows[h]
        st = cli.status(h)
        assert st["state"] == "FAILED" and "rebooted" in st["msg"]
        assert not any(r["state"] == "RUNNING" for r in st["roles"][0]["replicas"]), st
        assert cli("stop", h).returncode == 0
        assert cli("wait", h).returncode == 1
    assert cli("list", "--running").stdout.strip() == ""


@pytest.mark.parametrize("case", ["other-boot", "same-boot-other-start", "same-boot-no-start"])
def test_a_reused_pid_is_never_signalled(reaper: CLI, decoy: int, case: str) -> None:
    """Records whose pids now belong to someone else: not RUNNING, and stop kills nothing."""
    cli = reaper
    handle = cli.run("--cfg", "grace_period=0.2", "utils.sh", "sleep 300")
    running_replicas(cli, handle, 1)
    _power_off(cli, handle)
    # the worst case for each: the decoy's pid, and its real start time where one is recorded
    if case == "other-boot":
        _rewrite(cli, handle, boot=str(uuid.uuid4()), pid=decoy, ticks=start_ticks(decoy))
    elif case == "same-boot-other-start":
        _rewrite(cli, handle, pid=decoy, ticks=start_ticks(decoy) + 1)
    else:  # a record written when the start time could not be read
        _rewrite(cli, handle, pid=decoy, ticks=None)

    st = cli.status(handle)
    stop = cli("stop", handle, timeout=60)
    survived = pids_alive([decoy]) == [decoy]
    problems = []
    if st["state"] == "RUNNING" or not st["is_terminal"]:
        problems.append(
            f"status says {st['state']} for an app none of whose processes exist ({st['msg']!r})"
        )
    if not survived:
        problems.append("stop killed an unrelated process that reused a recorded pid")
    if stop.returncode != 0:
        problems.append(f"stop exited {stop.returncode}: {stop.stderr.strip()}")
    assert not problems, "\n".join(problems)


def test_boot_id_is_read_from_the_kernel() -> None:
    """The reboot detection needs a boot id; without one every record looks current."""
    from trainlaunch.node import processes

    assert processes.boot_id() == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert processes.boot_id() != ""
