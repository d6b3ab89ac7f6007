"""Ctrl-C to `trainlaunch ... 2>&1 | tee log` (issue 23 #11).

The terminal sends SIGINT to the whole foreground job: the CLI and `tee` die of the same
Ctrl-C, so every write the CLI makes to its stderr afterwards fails with EPIPE. That write
used to come before the stop: BrokenPipeError, exit 0 and the app left RUNNING. Here the CLI
and `tee` share one process group and the test signals the group, as the terminal does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import CLI, pids_alive
from tests.faults.fault_helpers import (
    LineReader,
    app_processes,
    wait_catches,
    wait_processes,
)

SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(300)\n"


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--wait", "--cfg", "grace_period=2", "utils.sh", "echo up; sleep 300"],
        ["run", "--log", "--cfg", "grace_period=2", "utils.sh", "echo up; sleep 300"],
        ["torchrun", "--nproc-per-node", "2", "sleeper.py"],
    ],
    ids=["run--wait", "run--log", "torchrun"],
)
def test_ctrl_c_through_tee_stops_the_app_and_exits_130(reaper: CLI, command: list[str]) -> None:
    cli = reaper
    (cli.cwd / "sleeper.py").write_text(SLEEPER)
    read, write = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainlaunch", *command],
        stdout=write,
        stderr=write,  # 2>&1
        env=cli.env,
        cwd=cli.cwd,
        process_group=0,
    )
    tee = subprocess.Popen(
        ["tee", str(cli.cwd / "log")],
        stdin=read,
        stdout=subprocess.PIPE,
        text=True,
        process_group=proc.pid,  # one job, as a shell's pipeline on a terminal
    )
    os.close(read)
    os.close(write)
    try:
        handle = LineReader(tee.stdout).wait_for(lambda ln: "local://" in ln, what="the handle")
        handle = handle[handle.index("local://") :].split()[0]
        procs = wait_processes(handle, 2 if command[0] == "torchrun" else 1)
        wait_catches(proc.pid, signal.SIGTERM)  # the CLI is waiting for the app
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=60) == 130
        tee.wait(timeout=10)
        assert pids_alive(procs) == [], "the CLI exited before every process of the app was gone"
        assert app_processes(handle) == []
        assert cli.status(handle)["state"] == "CANCELLED"
    finally:
        for p in (proc, tee):
            if p.poll() is None:
                p.kill()
                p.wait()
