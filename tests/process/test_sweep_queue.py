"""The local queue of a sweep's points (schedulers/local/queue.py), for real: a queued point
is a file, not a process; slots are handed on in submission order by the supervisors that end,
after a SIGKILL by the next command; a stop ends queued points without starting them.

Observed through the store's files and /proc, not through trainlaunch queries, where the point
is that nothing but the supervisors started the next point (any local query kicks the queue).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI, processes_with_env, wait_until
from trainlaunch.runner import get_runner

# a point runs until the test creates its flag file (the app polls, the test does not sleep)
UNTIL_FLAG = "while [ ! -e {flags}/{{i}} ]; do sleep 0.02; done"


def _sweep(cli: CLI, n: int, k: int, command: str, *extra: str) -> tuple[str, list[str]]:
    values = ",".join(str(i) for i in range(n))
    out = cli(
        "sweep", "--param", f"i={values}", "--max-parallel", str(k), *extra, "utils.sh", command,
        check=True,
    )  # fmt: skip
    handle = out.stdout.strip()
    record = json.loads((cli.home / "sweeps" / handle.rsplit(":", 1)[1] / "sweep.json").read_text())
    return handle, [p["handle"] for p in record["points"]]


def _dir(cli: CLI, handle: str) -> Path:
    return cli.home / "apps" / handle.rsplit("/", 1)[1]


def _record(cli: CLI, handle: str) -> dict[str, Any]:
    path = _dir(cli, handle) / "state.json"
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}


def _supervisors(cli: CLI) -> list[int]:
    """Live supervisor processes of this store (their environment names it). A supervisor's
    child between fork and exec (a replica being started) still shows its parent's command
    line: it is not one (seen in CI: 3 where 2 ran)."""
    cmdlines: dict[int, bytes] = {}
    for pid in processes_with_env("TRAINLAUNCH_HOME", str(cli.home)):
        try:
            cmdlines[pid] = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
    return [
        pid
        for pid, cmdline in cmdlines.items()
        if b"trainlaunch.schedulers.local.supervisor" in cmdline
        and cmdlines.get(_parent(pid)) != cmdline
    ]


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _started(cli: CLI, handles: list[str]) -> list[int]:
    """Indices of the points whose supervisor was started (supervisor.json exists)."""
    return [i for i, h in enumerate(handles) if (_dir(cli, h) / "supervisor.json").exists()]


def test_queued_points_cost_no_process_and_start_in_submission_order(
    cli: CLI, tmp_path: Path
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    _, handles = _sweep(cli, 6, 2, UNTIL_FLAG.format(flags=flags), "--no-snapshot")
    # the CLI has exited: the first two run, the other four are files in the queue
    wait_until(lambda: all(_record(cli, h).get("state") == "RUNNING" for h in handles[:2]), 60)
    assert _started(cli, handles) == [0, 1]
    assert len(_supervisors(cli)) == 2
    queue = list((cli.home / "slots").glob("*/queue/*"))
    assert all(f.stat().st_mode & 0o077 == 0 for f in (cli.home / "slots").glob("*/*"))
    assert sorted(q.name.split("-", 1)[1] for q in queue) == sorted(
        h.rsplit("/", 1)[1] for h in handles[2:]
    )
    with get_runner(environ=cli.env) as runner:
        st = runner.status(handles[3])
        assert st.state.name == "PENDING", st
        assert "2nd in line" in st.msg and "(2 of 2 running)" in st.msg, st.msg
    # each point that ends hands its slot to the oldest queued one, with no command running
    order = []
    for i in range(6):
        running = [j for j in _started(cli, handles) if j not in order]
        first = min(running)
        order.append(first)
        (flags / str(first)).touch()
        wait_until(lambda f=first: _record(cli, handles[f]).get("state") == "SUCCEEDED", 60)
        want = min(i + 2, 5)
        wait_until(lambda w=want: w in _started(cli, handles), 60, what=f"point {want} starts")
        assert len(_started(cli, handles)) == min(i + 3, 6)  # one at a time, in order
    assert order == list(range(6))
    wait_until(lambda: not _supervisors(cli), 60, what="no supervisor left")
    assert not list((cli.home / "slots").glob("*/queue/*"))


def test_a_killed_supervisor_hands_nothing_on_the_next_command_does(cli: CLI) -> None:
    _, handles = _sweep(cli, 3, 1, "sleep 60 # {i}", "--no-snapshot")
    wait_until(lambda: _record(cli, handles[0]).get("state") == "RUNNING", 60)
    assert _started(cli, handles) == [0]
    pid = json.loads((_dir(cli, handles[0]) / "supervisor.json").read_text())["pid"]
    os.kill(pid, signal.SIGKILL)  # the kernel frees its slot lock; nobody hands it on
    wait_until(lambda: pid not in _supervisors(cli), 30)
    assert _started(cli, handles) == [0]  # nothing of the queue moved by itself
    listed = cli("list", "--json", check=True)  # any local command: the queue resumes
    assert listed.returncode == 0
    wait_until(lambda: _started(cli, handles) == [0, 1], 30, what="point 1 started")
    wait_until(lambda: _record(cli, handles[1]).get("state") == "RUNNING", 60)
    cli("stop", handles[1], check=True)
    wait_until(lambda: _started(cli, handles) == [0, 1, 2], 30, what="point 2 started")
    cli("stop", handles[2], check=True)


def test_stop_a_queued_point_then_the_running_one(cli: CLI) -> None:
    _, handles = _sweep(cli, 3, 1, "sleep 60 # {i}", "--no-snapshot")
    wait_until(lambda: _record(cli, handles[0]).get("state") == "RUNNING", 60)
    stopped = cli("stop", handles[1], check=True)  # queued: no process to stop
    assert "CANCELLED" in stopped.stdout, stopped.stdout
    assert _record(cli, handles[1])["state"] == "CANCELLED"
    assert _record(cli, handles[1])["msg"] == "stopped before it started"
    assert not (_dir(cli, handles[1]) / "supervisor.json").exists()
    cli("stop", handles[0], check=True)
    # its slot goes to point 2 (point 1 was stopped): in line it was the oldest left
    wait_until(lambda: _record(cli, handles[2]).get("state") == "RUNNING", 60)
    assert _started(cli, handles) == [0, 2]
    cli("stop", handles[2], check=True)
    wait_until(lambda: not _supervisors(cli), 30)


def test_stop_sweep_with_queued_points_starts_nothing_later(cli: CLI) -> None:
    handle, handles = _sweep(cli, 12, 2, "sleep 60 # {i}", "--no-snapshot")
    wait_until(lambda: len(_supervisors(cli)) == 2, 60)
    stopped = cli("stop", handle, check=True)
    assert stopped.stdout.startswith(f"{handle}\tCANCELLED=12"), stopped.stdout
    assert cli("wait", handle).returncode == 6  # every point CANCELLED
    wait_until(lambda: not _supervisors(cli), 30, what="no supervisor left")
    # the supervisors that ended recorded every queued point CANCELLED and started none
    wait_until(lambda: not list((cli.home / "slots").glob("*/queue/*")), 30)
    assert cli("list", "--json", check=True).returncode == 0  # a command that would kick
    assert _started(cli, handles) == [0, 1]
    assert {_record(cli, h).get("state") for h in handles} == {"CANCELLED"}
    assert not processes_with_env("TRAINLAUNCH_HOME", str(cli.home))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_submission_leaves_every_point_in_the_sweep(
    cli: CLI, sig: signal.Signals
) -> None:
    """Issue 23 #5: each point is submitted and recorded under held interrupts."""
    values = ",".join(str(i) for i in range(400))
    proc = cli.popen(
        "sweep", "--param", f"i={values}", "--max-parallel", "2", "--no-snapshot",
        "utils.sh", "sleep 60 # {i}",
    )  # fmt: skip
    apps = cli.home / "apps"
    wait_until(lambda: apps.is_dir() and len(list(apps.iterdir())) >= 5, 60)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    (sweep_id,) = [d.name for d in (cli.home / "sweeps").iterdir()]
    points = json.loads((cli.home / "sweeps" / sweep_id / "sweep.json").read_text())["points"]
    recorded = {p["handle"].rsplit("/", 1)[1] for p in points if p["handle"]}
    on_disk = {d.name for d in apps.iterdir() if not d.name.startswith(".")}
    assert on_disk == recorded, on_disk ^ recorded
    assert not list(apps.glob("*/.app.json.*.tmp"))  # no half-written request
    assert all((apps / a / "app.json").exists() for a in on_disk)
    handle = f"local://trainlaunch/sweep:{sweep_id}"
    stopped = cli("stop", handle, check=True)
    assert stopped.stdout.startswith(f"{handle}\tCANCELLED={len(recorded)}"), stopped.stdout
    wait_until(lambda: not _supervisors(cli), 30, what="no supervisor left")


def test_stop_sweep_during_submission_submits_nothing_more(cli: CLI) -> None:
    """Issue 23 #6: a stopped sweep submits no more points; those submitted meanwhile stop."""
    values = ",".join(str(i) for i in range(400))
    proc = cli.popen(
        "sweep", "--param", f"i={values}", "--max-parallel", "2", "--no-snapshot",
        "utils.sh", "sleep 60 # {i}",
    )  # fmt: skip
    sweeps = cli.home / "sweeps"
    wait_until(lambda: sweeps.is_dir() and any(sweeps.iterdir()), 60)
    (sweep_id,) = [d.name for d in sweeps.iterdir()]
    handle = f"local://trainlaunch/sweep:{sweep_id}"
    apps = cli.home / "apps"
    wait_until(lambda: apps.is_dir() and len(list(apps.iterdir())) >= 5, 60)
    cli("stop", handle, check=True)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    status = cli("status", handle, "--json", check=True)
    states = {p["state"] for p in json.loads(status.stdout)["points"]}
    assert states <= {"CANCELLED", "UNSUBMITTED"}, states
    wait_until(lambda: not _supervisors(cli), 30, what="no supervisor left")
    assert not processes_with_env("TRAINLAUNCH_HOME", str(cli.home))
