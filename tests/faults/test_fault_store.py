"""The app store's disk fails: full, or read-only. One clear line and exit 5; no record torn.

The store is a real tmpfs mounted on $TRAINLAUNCH_HOME (root only; skipped elsewhere), so
ENOSPC and EROFS come from the kernel, not from a fake.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CLI, pids_alive, wait_until
from tests.faults.fault_helpers import (
    app_dir,
    app_processes,
    fill_disk,
    kill9,
    mount_tmpfs,
    reap_store,
    remount,
    running_replicas,
    supervisor_pid,
    umount,
    wait_processes,
)


def _records_intact(home: Path) -> list[str]:
    """Every JSON record in the store parses (a torn write would not)."""
    bad = []
    for path in (home / "apps").glob("*/*.json"):
        try:
            json.loads(path.read_bytes())
        except ValueError as e:
            bad.append(f"{path}: {e}")
    return bad


def _one_error(stderr: str, *needles: str) -> str:
    errors = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, stderr
    assert "Traceback" not in stderr, stderr
    for n in needles:
        assert n in errors[0], stderr
    return errors[0]


def test_disk_full_run_fails_with_exit_5_and_the_store_stays_usable(tmpfs_home: CLI) -> None:
    cli = tmpfs_home
    done = cli.run("utils.echo", "--msg", "before the disk filled")
    assert cli.wait(done)["state"] == "SUCCEEDED"
    filler = fill_disk(cli.home)

    proc = cli("run", "utils.echo")
    assert proc.returncode == 5, proc.stderr
    _one_error(proc.stderr, "No space left on device")
    assert proc.stdout == "", "no handle may be printed for an app that was not started"

    listed = cli("list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["handle"], r["state"]) for r in rows] == [(done, "SUCCEEDED")]
    assert cli.status(done)["state"] == "SUCCEEDED"
    assert "before the disk filled" in cli("logs", done, check=True).stdout
    assert _records_intact(cli.home) == []
    assert [p for p in (cli.home / "apps").glob("*/.*.tmp")] == [], "temporary files left"

    filler.unlink()  # space is back: the store works again
    again = cli.run("utils.echo", "--msg", "after")
    assert cli.wait(again)["state"] == "SUCCEEDED"


def test_disk_full_during_stop_of_an_orphaned_app(tmpfs_home: CLI) -> None:
    """stop must write the final record itself (the supervisor is dead): the space reserved
    at `run` for exactly that record lets it (issue 13.6; it used to fail with exit 5)."""
    cli = tmpfs_home
    handle = cli.run("utils.sh", "--num-replicas", "2", "sleep 300")
    running_replicas(cli, handle, 2)
    procs = wait_processes(handle, 2)
    kill9(supervisor_pid(cli, handle))
    fill_disk(cli.home)

    proc = cli("stop", handle)
    assert proc.returncode == 0, proc.stderr
    assert pids_alive(procs) == [], "stop must kill the processes"
    assert app_processes(handle) == []
    assert _records_intact(cli.home) == []
    st = cli.status(handle)
    assert st["state"] == "CANCELLED", st
    assert not (app_dir(cli, handle) / ".reserve").exists(), "the reserve was not released"


def test_disk_full_while_the_supervisor_runs_then_stop(tmpfs_home: CLI) -> None:
    """The supervisor cannot record the end; stop must not hang for grace + 10 s on it."""
    cli = tmpfs_home
    handle = cli.run("--cfg", "grace_period=1", "utils.sh", "sleep 300")
    running_replicas(cli, handle, 1)
    procs = wait_processes(handle, 1)
    sup = supervisor_pid(cli, handle)
    fill_disk(cli.home)

    t0 = time.monotonic()
    proc = cli("stop", handle)
    took = time.monotonic() - t0
    assert proc.returncode in (0, 5), proc.stderr
    if proc.returncode == 5:
        _one_error(proc.stderr, "No space left on device")
    assert pids_alive([sup, *procs]) == []
    assert _records_intact(cli.home) == []
    st = cli.status(handle)
    assert st["is_terminal"], st
    # the supervisor dies within the grace period (1 s); waiting for it is grace + 10 s
    assert took < 8, (
        f"stop took {took:.1f}s: it waited out grace + 10 s for a record "
        "from a supervisor that had already died"
    )


def test_read_only_store(tmpfs_home: CLI) -> None:
    cli = tmpfs_home
    done = cli.run("utils.echo", "--msg", "written before")
    assert cli.wait(done)["state"] == "SUCCEEDED"
    remount(cli.home, "ro")
    try:
        proc = cli("run", "utils.echo")
        assert proc.returncode == 5, proc.stderr
        _one_error(proc.stderr, "Read-only file system")
        for args in (
            ["status", done],
            ["list"],
            ["logs", done],
            ["describe", done],
            ["wait", done],
        ):
            got = cli(*args)
            assert got.returncode == 0, f"{args}: {got.stderr}"
        stop = cli("stop", done)  # the app has ended: nothing to do, nothing to write
        assert stop.returncode in (0, 5), f"stop on a read-only store: {stop.stderr}"
        assert "Traceback" not in stop.stderr
        if stop.returncode == 5:
            _one_error(stop.stderr, "Read-only")
    finally:
        remount(cli.home, "rw")


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root ignores directory permissions; the tmpfs "
    "remount test covers a read-only store there",
)
def test_apps_dir_without_write_permission(reaper: CLI) -> None:
    cli = reaper
    done = cli.run("utils.echo")
    cli.wait(done)
    apps = cli.home / "apps"
    apps.chmod(0o500)
    try:
        proc = cli("run", "utils.echo")
        assert proc.returncode == 5, proc.stderr
        _one_error(proc.stderr, "Permission denied")
        assert cli("status", done).returncode == 0
        assert cli("list").returncode == 0
    finally:
        apps.chmod(0o700)


def test_supervisor_cannot_write_its_record_app_is_not_left_running(tmpfs_home: CLI) -> None:
    """The disk fills while an app runs: whatever it recorded last, status ends up true."""
    cli = tmpfs_home
    handle = cli.run(
        "utils.sh", "--num-replicas", "2", "sleep 300 & trap 'kill $!; exit 3' USR1; wait; wait"
    )
    reps = running_replicas(cli, handle, 2)
    fill_disk(cli.home)
    os.kill(reps[0]["pid"], signal.SIGUSR1)  # replica 0 fails: the supervisor must record it
    wait_until(
        lambda: not pids_alive([supervisor_pid(cli, handle)]),
        timeout=30,
        what="the supervisor to give up",
    )
    st = cli.status(handle)
    assert st["is_terminal"], st
    assert st["state"] == "FAILED"
    assert app_processes(handle) == [], "the supervisor died and left replicas behind"
    assert _records_intact(cli.home) == []


@pytest.fixture
def tmpfs_2m_home(reaper: CLI) -> Iterator[CLI]:
    """A cli whose store is its own 2 MiB tmpfs (the size the outside probe used)."""
    mount_tmpfs(reaper.home, "2m")
    try:
        yield reaper
    finally:
        reap_store(reaper.home)
        umount(reaper.home)


def test_chatty_app_fills_the_store_the_end_is_recorded_and_said(tmpfs_2m_home: CLI) -> None:
    """Issue 13.6: the supervisor used to die silently (state.json RUNNING, status "died ...
    (killed?)"). Now it records the end in the space `run` reserved, and says why."""
    cli = tmpfs_2m_home
    # prints twice the store's size (what does not fit is dropped and counted: its stdout
    # never fails, issue 23 #14), then exits 1
    handle = cli.run("utils.sh", "--num-replicas", "2", "yes chatter | head -c 4194304; exit 1")
    final = cli.wait(handle, timeout=120)
    assert final["state"] == "FAILED", final
    assert "output lost while the app store was full" in final["msg"], final["msg"]
    assert "died" not in final["msg"], final["msg"]
    assert pids_alive([supervisor_pid(cli, handle)]) == [], "the supervisor is still there"
    assert _records_intact(cli.home) == []
    assert "chatter" in cli("logs", handle, "--raw", check=True).stdout.splitlines()[0]

    # the store is full: a later run fails with one line and leaves no half-created app
    before = sorted(p.name for p in (cli.home / "apps").iterdir())
    proc = cli("run", "utils.echo")
    assert proc.returncode == 5, proc.stderr
    _one_error(proc.stderr, "No space left on device")
    assert sorted(p.name for p in (cli.home / "apps").iterdir()) == before, "app dir left behind"
    assert [r["handle"] for r in json.loads(cli("list", "--json", check=True).stdout)] == [handle]


def test_store_full_while_supervisor_is_killed_is_said_in_status(tmpfs_home: CLI) -> None:
    """No record of the end and a full store: status names the full disk, not only "killed?"."""
    cli = tmpfs_home
    gate = cli.home.parent / "gate"
    handle = cli.run("utils.sh", f"while [ ! -e {gate} ]; do sleep 0.02; done")
    running_replicas(cli, handle, 1)
    kill9(supervisor_pid(cli, handle))
    (app_dir(cli, handle) / ".reserve").unlink()  # as if the reserve was already spent
    fill_disk(cli.home)
    gate.touch()
    wait_until(lambda: app_processes(handle) == [], what="the replica to end")
    st = cli.status(handle)
    assert st["state"] == "UNKNOWN" and st["is_terminal"], st
    assert "no space left on device" in st["msg"], st["msg"]


_WRITER = """
import os, sys, time
progress, stop = sys.argv[1], sys.argv[2]
line, n = 0, 0
while not os.path.exists(stop):
    for _ in range(200):
        text = f"line {line:09d} " + "x" * 48 + "\\n"
        sys.stdout.write(text)
        n += len(text)
        line += 1
    sys.stdout.flush()
    print(f"err {line:09d}", file=sys.stderr, flush=True)
    with open(progress + ".tmp", "w") as f:
        f.write(str(line))
    os.replace(progress + ".tmp", progress)
    time.sleep(0.005)  # the app's own pace (~2 MB/s), not the test's synchronisation
sys.stdout.write(f"END lines={line} bytes={n}\\n")
"""


def _lines_written(progress: Path) -> int:
    try:
        return int(progress.read_text() or 0)
    except (OSError, ValueError):
        return 0


def _lost_marks(text: str) -> int:
    """The bytes the log's own marker lines say are missing."""
    return sum(
        int(ln.split()[1])
        for ln in text.splitlines()
        if ln.startswith("[trainlaunch: ") and "bytes lost here" in ln
    )


def test_a_full_disk_for_seconds_loses_output_not_the_app(tmpfs_2m_home: CLI) -> None:
    """Issue 23 #14: a 5-second full disk killed a healthy app (its stdout pipe was closed:
    EPIPE) and combined.log silently ended earlier than stdout.log. Now the pipe is drained
    while the store is full, what cannot be written is dropped and counted, and the logs and
    status say how much; the app goes on and ends SUCCEEDED."""
    cli = tmpfs_2m_home
    work = cli.home.parent  # outside the store: the app's progress and its stop file
    (work / "writer.py").write_text(_WRITER)
    progress, stop = work / "progress", work / "stop"
    handle = cli.run("utils.python", "--script", str(work / "writer.py"), str(progress), str(stop))
    wait_until(lambda: _lines_written(progress) > 2000, what="the app to write")
    filler = fill_disk(cli.home)
    full_at = _lines_written(progress)
    t0 = time.monotonic()
    # the app keeps writing while nothing can be stored (5 s, the probe's): its pipe is read
    wait_until(
        lambda: _lines_written(progress) > full_at + 20_000 and time.monotonic() - t0 > 5,
        timeout=60,
        what="5 s of output while full",
    )
    full_for = time.monotonic() - t0
    st = cli.status(handle)
    assert st["state"] == "RUNNING", st
    filler.unlink()  # space again: the logs say where output is missing, then go on
    resumed = _lines_written(progress)
    wait_until(lambda: _lines_written(progress) > resumed + 2000, what="output after the disk")
    stop.touch()
    final = cli.wait(handle, timeout=60)
    assert final["state"] == "SUCCEEDED", final
    assert "output lost while the app store was full" in final["msg"], final["msg"]

    (logs,) = (app_dir(cli, handle) / "logs").glob("*/0")
    out = (logs / "stdout.log").read_text()
    last = out.splitlines()[-1]
    assert last.startswith("END "), last
    written = int(last.split("bytes=")[1])
    lost = _lost_marks(out)
    # a marker may start with a newline of its own (the gap cut a line): count bytes exactly
    body = out.encode()
    marks = [ln for ln in out.splitlines(keepends=True) if ln.startswith("[trainlaunch: ")]
    extra = len(body) - sum(len(m.encode()) for m in marks) - len(last) - 1
    assert lost > 0, "nothing was lost: the disk was never full for this app"
    assert extra + lost == written, (extra, lost, written)
    state = json.loads((app_dir(cli, handle) / "state.json").read_text())
    recorded = state["replicas"][0]["lost"]
    assert recorded["stdout.log"] == lost, recorded
    combined = (logs / "combined.log").read_text()
    assert combined.splitlines()[-1] == last, "combined.log ends before stdout.log"
    assert recorded["combined.log"] == _lost_marks(combined), recorded
    assert "bytes lost here" in cli("logs", handle, check=True).stdout
    print(f"full for {full_for:.1f}s: {lost} of {written} bytes lost, app {final['state']}")
