"""kill -9 of the supervisor, of one replica and of the CLI: status stays true, nothing leaks.

tests/process/test_local_cli.py already covers a killed supervisor with one plain replica;
these add process trees, replicas that ignore SIGTERM, the supervisor's startup window, the
retry policies and the CLI itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import CLI, pids_alive, wait_until
from tests.faults.fault_helpers import (
    LineReader,
    app_dir,
    app_processes,
    elapsed,
    kill9,
    read_record,
    running_replicas,
    supervisor_pid,
    wait_catches,
    wait_processes,
)

# every replica: a TERM-ignoring shell with two TERM-ignoring grandchildren in its group
TREE = "trap '' TERM; sleep 300 & sleep 300 & echo ready; wait"


def test_supervisor_sigkill_with_process_trees_then_stop_cleans_everything(reaper: CLI) -> None:
    cli = reaper
    handle = cli.run("--cfg", "grace_period=0.5", "utils.sh", "--num-replicas", "3", TREE)
    procs = wait_processes(handle, 9)  # 3 shells + 6 sleeps
    running_replicas(cli, handle, 3)
    sup = supervisor_pid(cli, handle)
    kill9(sup)

    st = cli.status(handle)
    assert st["state"] == "UNKNOWN", st
    assert "3 replica process(es) still running" in st["msg"], st["msg"]
    assert {r["state"] for r in st["roles"][0]["replicas"]} == {"UNKNOWN"}
    listed = json.loads(cli("list", "--json", check=True).stdout)
    assert [(r["handle"], r["state"]) for r in listed] == [(handle, "UNKNOWN")]
    assert pids_alive(procs) == procs, "killing the supervisor must not touch the replicas"

    t0 = time.monotonic()
    out = cli("stop", handle, check=True)
    assert elapsed(t0) < 10, "stop took longer than grace period + slack"
    assert out.stdout.strip() == f"{handle}\tCANCELLED"
    assert pids_alive(procs) == [], "stop left processes of the app alive"
    assert app_processes(handle) == []
    final = cli.status(handle)
    assert final["state"] == "CANCELLED"
    assert {r["state"] for r in final["roles"][0]["replicas"]} == {"CANCELLED"}
    assert cli("wait", handle).returncode == 6


def _stop_inside_startup_window(cli: CLI, handle: str) -> bool:
    """SIGSTOP the supervisor as soon as it has a child; True if no replica pid is recorded."""
    sup = supervisor_pid(cli, handle)
    children = f"/proc/{sup}/task/{sup}/children"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with open(children) as f:
                if f.read().split():
                    break
        except OSError:
            return False
    os.kill(sup, signal.SIGSTOP)
    state = read_record(app_dir(cli, handle) / "state.json")
    in_window = not any(r.get("pid") for r in state.get("replicas", []))
    kill9(sup)
    return in_window


def test_supervisor_killed_before_it_recorded_any_replica(reaper: CLI) -> None:
    """The supervisor dies after starting replicas but before writing their pids.

    The records then name no process; status must still not claim the app is over while
    its replicas run, and stop must still leave nothing behind.
    """
    cli = reaper
    for _ in range(5):
        handle = cli.run("utils.sh", "--num-replicas", "16", "sleep 300")
        if _stop_inside_startup_window(cli, handle):
            break
        cli("stop", handle, check=True)
    else:
        pytest.skip("could not stop the supervisor inside its startup window in 5 tries")
    live = wait_processes(handle, 1)
    problems = []
    st = cli.status(handle)
    if st["is_terminal"]:
        problems.append(
            f"status says {st['state']} ({st['msg']!r}) while {len(live)} "
            "replica process(es) of the app are running"
        )
    stop = cli("stop", handle)
    if stop.returncode != 0:
        problems.append(f"stop exited {stop.returncode}: {stop.stderr.strip()}")
    left = app_processes(handle)
    if left:
        problems.append(f"after stop, {len(left)} replica process(es) are orphaned: {left}")
    assert not problems, "\n".join(problems)


def test_replica_sigkill_fails_the_app_and_cancels_the_others(reaper: CLI) -> None:
    cli = reaper
    handle = cli.run(
        "--cfg", "grace_period=0.5", "utils.sh", "--num-replicas", "2", "sleep 300 & wait"
    )
    reps = running_replicas(cli, handle, 2)
    procs = wait_processes(handle, 4)
    victim = next(r for r in reps if r["replica_id"] == 0)
    os.kill(victim["pid"], signal.SIGKILL)

    final = cli.wait(handle)
    assert final["state"] == "FAILED"
    assert final["exit_code"] == 128 + signal.SIGKILL
    assert final["failed_replica"] == "sh/0"
    by_id = {r["id"]: r for r in final["roles"][0]["replicas"]}
    assert by_id[0]["state"] == "FAILED" and by_id[0]["signal"] == "SIGKILL"
    assert "killed by SIGKILL" in by_id[0]["message"]
    assert by_id[1]["state"] == "CANCELLED"
    assert pids_alive(procs) == [], "the killed replica's children or the other replica leaked"
    waited = cli("wait", handle)
    assert waited.returncode == 1 and "FAILED" in waited.stderr
    assert cli("wait", "--app-exit-code", handle).returncode == 137


@pytest.mark.parametrize(
    "policy,others_restart",
    [
        ("REPLICA", False),
        pytest.param("ROLE", True, marks=pytest.mark.slow),
        pytest.param("APPLICATION", True, marks=pytest.mark.slow),
    ],
)
def test_replica_sigkill_restarts_per_retry_policy(
    reaper: CLI, policy: str, others_restart: bool
) -> None:
    cli = reaper
    handle = cli.run(
        "--cfg",
        "grace_period=0.5",
        "utils.sh",
        "--num-replicas",
        "2",
        "--max-retries",
        "1",
        "--retry-policy",
        policy,
        "sleep 300",
    )
    before = {r["replica_id"]: r["pid"] for r in running_replicas(cli, handle, 2)}
    os.kill(before[0], signal.SIGKILL)

    def restarted() -> dict[int, int] | None:
        reps = read_record(app_dir(cli, handle) / "state.json")["replicas"]
        now = {r["replica_id"]: r["pid"] for r in reps if r["state"] == "RUNNING"}
        return now if len(now) == 2 and now[0] != before[0] else None

    after = wait_until(restarted, what=f"replica 0 to be restarted ({policy})")
    st = cli.status(handle)
    assert st["state"] == "RUNNING"
    by_id = {r["id"]: r for r in st["roles"][0]["replicas"]}
    assert by_id[0]["restarts"] == 1
    assert (after[1] != before[1]) is others_restart
    assert by_id[1]["restarts"] == (1 if others_restart else 0)
    assert pids_alive([before[0]]) == []
    if not others_restart:
        assert pids_alive([before[1]]) == [before[1]], "replica 1 must be left alone"

    # the retry budget is spent: the next kill fails the app
    os.kill(after[0], signal.SIGKILL)
    final = cli.wait(handle)
    assert final["state"] == "FAILED" and final["exit_code"] == 137
    assert app_processes(handle) == []


def test_cli_sigkill_during_run_wait_leaves_the_app_running(reaper: CLI) -> None:
    cli = reaper
    proc = cli.popen(
        "run",
        "--wait",
        "utils.sh",
        "--num-replicas",
        "2",
        "sleep 300",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out = LineReader(proc.stdout)
    handle = out.wait_for(lambda ln: ln.startswith("local://"), what="the handle")
    wait_catches(proc.pid, signal.SIGTERM)  # it is in its waiting loop now
    reps = running_replicas(cli, handle, 2)
    proc.kill()
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL

    st = cli.status(handle)
    assert st["state"] == "RUNNING"
    assert [r["pid"] for r in st["roles"][0]["replicas"]] == [r["pid"] for r in reps]
    assert pids_alive([r["pid"] for r in reps]) == [r["pid"] for r in reps]
    assert cli("wait", "--timeout", "0.2", handle).returncode == 7
    assert cli("logs", handle).returncode == 0
    cli("stop", handle, check=True)
    assert cli.status(handle)["state"] == "CANCELLED"
    assert app_processes(handle) == []


GATED = str(Path(__file__).resolve().parents[1] / "fixtures" / "ddp" / "gated.py")


def _supervisor_dies_then_app_ends(cli: CLI, *run_args: str) -> tuple[str, dict]:
    """Start the app, kill -9 its supervisor, let every replica end on its own; final status."""
    gate = cli.cwd / "gate"
    handle = cli.run(*run_args)
    running_replicas(cli, handle, 1)
    wait_until(lambda: "waiting for the gate" in cli("logs", handle).stdout, what="the app")
    kill9(supervisor_pid(cli, handle))
    gate.touch()
    wait_until(lambda: app_processes(handle) == [], what=f"{handle}'s processes to end")
    return handle, cli.status(handle)


@pytest.mark.parametrize("exit_code,state", [(0, "SUCCEEDED"), (3, "FAILED")])
def test_killed_supervisor_reports_the_result_the_node_agent_recorded(
    reaper: CLI, exit_code: int, state: str
) -> None:
    """Issue 13.5: ranks that finish after their supervisor died are not a failure by default:
    dist.ddp's node agent records the result in agent.json, and status/wait report it."""
    cli = reaper
    gate = cli.cwd / "gate"
    handle, st = _supervisor_dies_then_app_ends(
        cli,
        "dist.ddp",
        "--env",
        f"GATE={gate},GATE_EXIT={exit_code}",
        GATED,
    )
    assert st["state"] == state, st
    assert st["is_terminal"], st
    assert "died" in st["msg"] and "records" in st["msg"], st["msg"]
    waited = cli("wait", handle)
    assert waited.returncode == (0 if exit_code == 0 else 1), waited.stderr
    assert "Traceback" not in waited.stderr


def test_killed_supervisor_of_plain_replicas_is_unknown_and_wait_says_so(reaper: CLI) -> None:
    """A plain replica's exit code dies with its supervisor: UNKNOWN (ended), with the reason;
    `wait` exits 8 (documented), not 1 (FAILED) and not forever."""
    cli = reaper
    gate = cli.cwd / "gate"
    handle, st = _supervisor_dies_then_app_ends(
        cli,
        "utils.sh",
        f"echo waiting for the gate; while [ ! -e {gate} ]; do sleep 0.02; done",
    )
    assert st["state"] == "UNKNOWN" and st["is_terminal"], st
    assert "died" in st["msg"] and "not recorded" in st["msg"], st["msg"]
    waited = cli("wait", handle, timeout=30)
    assert waited.returncode == 8, (waited.returncode, waited.stderr)
    assert "UNKNOWN" in waited.stderr and "Traceback" not in waited.stderr
    listed = json.loads(cli("list", "--json", check=True).stdout)
    assert [r["state"] for r in listed if r["handle"] == handle] == ["UNKNOWN"]


def test_supervisor_killed_during_stop_requeue_is_an_error_not_exit_0(reaper: CLI) -> None:
    """Issue 23 #25: `stop --requeue` exited 0 printing UNKNOWN when the supervisor died
    while it requeued the app. Now: exit 3 and one line saying what happened and what is left."""
    cli = reaper
    got = cli.home.parent / "got-term"
    handle = cli.run(
        "--cfg",
        "max_requeues=1,grace_period=30",
        "utils.sh",
        f"trap 'touch {got}' TERM; while true; do sleep 0.05; done",
    )
    running_replicas(cli, handle, 1)
    proc = cli.popen("stop", "--requeue", handle, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(got.exists, what="the replica's SIGTERM (the requeue under way)")
    kill9(supervisor_pid(cli, handle))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, (out, err)
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "died during the requeue" in errors[0], err
    assert "UNKNOWN" in errors[0] and "still running" in errors[0], err
    assert "Traceback" not in err and out == "", (out, err)
    cli("stop", handle, check=True)  # what it said to do: nothing is left afterwards
    assert cli.status(handle)["state"] == "CANCELLED"
    assert app_processes(handle) == []
