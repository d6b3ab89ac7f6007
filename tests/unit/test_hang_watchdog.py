"""The one hang watchdog (stacks/watchdog.py), run on an app of a backend written here.

``FilesApp`` is what a third backend would write: its ranks' progress files (real files, their
modification times set), a dump that names why there is no stack, and restart/stop that only
say they were asked. Nothing of the watchdog is patched.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from trainlaunch.stacks import watchdog
from trainlaunch.stacks.dump import Target
from trainlaunch.stacks.progress import RankProgress
from trainlaunch.stacks.values import ERROR, RankStack


class FilesApp:
    """Two ranks whose progress is one file each; restarts and stops are recorded."""

    def __init__(self, root: Path, restarts: int = 0) -> None:
        self.root, self.restarts = root, restarts
        self.files = [root / "rank0.log", root / "rank1.log"]
        for f in self.files:
            f.touch()
        self.quiet_for(100.0)
        self.done: list[tuple[str, int]] = []
        self.running = True

    def quiet_for(self, seconds: float) -> None:
        """The ranks' last progress was seconds ago."""
        t = time.time() - seconds
        for f in self.files:
            os.utime(f, (t, t))

    @property
    def record_dir(self) -> Path:
        return self.root

    @property
    def dump_dir(self) -> Path:
        return self.root / "logs"

    def ranks(self) -> list[RankProgress]:
        return [
            RankProgress(r, "trainer", 0, 100 + r, None, self.running, None, 0.0, (f,), host="n1")
            for r, f in enumerate(self.files)
        ]

    def dump(self, targets: list[Target]) -> list[RankStack]:
        return [t.stack(state=ERROR, error="no py-spy in this test") for t in targets]

    def restarts_left(self) -> bool:
        return self.restarts > 0

    def restart(self, hang: watchdog.Hang) -> None:
        self.restarts -= 1
        self.done.append(("restart", hang.number))

    def stop(self, hang: watchdog.Hang) -> None:
        self.running = False
        self.done.append(("stop", hang.number))


def test_a_hang_is_dumped_recorded_and_fires_once(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    app = FilesApp(tmp_path)
    dog = watchdog.Watchdog(app, 10.0, "none")

    hang = dog.tick()

    assert hang is not None and hang.number == 1 and hang.action == "none" and not hang.stopped
    rec = watchdog.read_record(tmp_path)
    assert rec == hang.record() and rec["idle_s"] >= 100 and rec["on_hang"] == "none"
    assert rec["summary"] == ["ranks 0-1: no stack: no py-spy in this test"]
    assert hang.dump == tmp_path / "logs" / "hang-1.txt"
    assert hang.dump.read_text().startswith("# no output or metrics from any rank for 100s")
    doc = json.loads(hang.dump_json.read_text())
    assert doc["groups"][0]["hosts"] == ["n1"] and doc["idle_s"] == rec["idle_s"]
    assert dog.tick() is None  # no progress since: the same hang does not fire again
    app.quiet_for(50.0)  # some progress, then quiet again
    again = dog.tick()
    assert again is not None and again.number == 2 and app.done == []


def test_nothing_fires_without_a_timeout_or_a_running_rank_or_before_the_timeout(
    tmp_path: Path,
) -> None:
    app = FilesApp(tmp_path)
    assert watchdog.Watchdog(app, None, "stop").tick() is None
    assert watchdog.Watchdog(app, 1000.0, "stop").tick() is None
    app.running = False
    assert watchdog.Watchdog(app, 10.0, "stop").tick() is None
    assert app.done == [] and watchdog.read_record(tmp_path) is None


def test_restart_while_one_is_left_then_stop(tmp_path: Path) -> None:
    app = FilesApp(tmp_path, restarts=1)
    dog = watchdog.Watchdog(app, 10.0, "restart")
    first = dog.tick()
    assert first is not None and first.action == "restart" and app.done == [("restart", 1)]
    app.quiet_for(20.0)  # the restarted ranks went quiet too
    second = dog.tick()
    assert second is not None and second.stopped and app.done[-1] == ("stop", 2)
    assert second.on_hang == "restart" and watchdog.read_record(tmp_path)["action"] == "stop"  # type: ignore[index]
    assert second.message() == (
        "hung: no output or metrics from any rank for 20s; ranks 0-1: no stack: no py-spy in "
        f"this test; stopped (no restart left); stacks in {tmp_path}/logs/hang-2.txt"
    )


def test_a_new_watchdog_numbers_on_from_the_record(tmp_path: Path) -> None:
    app = FilesApp(tmp_path)
    assert watchdog.Watchdog(app, 10.0, "none").tick().number == 1  # type: ignore[union-attr]
    # a requeued Slurm job starts a new watchdog process: it must not overwrite hang-1
    assert watchdog.Watchdog(app, 10.0, "none").tick().number == 2  # type: ignore[union-attr]


def test_a_damaged_record_does_not_stop_the_watchdog(tmp_path: Path) -> None:
    (tmp_path / "watchdog.json").write_text("{not json")
    app = FilesApp(tmp_path)
    hang = watchdog.Watchdog(app, 10.0, "none").tick()
    assert hang is not None and hang.number == 1
    rec = json.loads((tmp_path / "watchdog.json").read_text())
    assert rec["hangs"] == 1 and rec["action"] == "none"


def test_watch_returns_the_hang_that_stopped_the_app_or_none_once_it_ended(
    tmp_path: Path,
) -> None:
    app = FilesApp(tmp_path)
    hang = watchdog.watch(watchdog.Watchdog(app, 10.0, "stop"), lambda: app.running, poll_s=0)
    assert hang is not None and hang.stopped and app.done == [("stop", 1)]
    app.running = True
    app.quiet_for(0.0)  # progressing: no hang; the app ends after three looks
    looks = iter([True, True, True, False])
    assert watchdog.watch(watchdog.Watchdog(app, 10.0, "stop"), lambda: next(looks), 0) is None


def test_hang_options_from_a_recorded_cfg() -> None:
    assert watchdog.hang_options({}) == (None, "none")
    assert watchdog.hang_options({"hang_timeout": 5, "on_hang": "stop"}) == (5.0, "stop")
    assert watchdog.hang_options({"hang_timeout": 0, "on_hang": "reboot"}) == (None, "none")


def test_on_slurm_a_requeue_spends_no_restart_of_the_hang_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainlaunch.schedulers.slurm.watchdog import BatchJob

    # attempt 0 saved and asked for a requeue (exit 75): Slurm's restart count is 1, but
    # status counts no restart (num_restarts 0), and the local backend would restart
    (tmp_path / "attempts").write_text(
        "attempt=0 start=1.0\nattempt=0 end=2.0 exit=75 action=requeue term=0 left=\n"
        "attempt=1 start=3.0\n"
    )
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert BatchJob(tmp_path, "", retries=1).restarts_left()
    # a failure retried and a hang restarted count, as in status's restarts
    with open(tmp_path / "attempts", "a") as f:
        f.write("attempt=1 hang=1\n")
    assert not BatchJob(tmp_path, "", retries=1).restarts_left()
    assert BatchJob(tmp_path, "", retries=2).restarts_left()


def test_a_wall_clock_step_is_not_a_hang(tmp_path: Path) -> None:
    # issue 23 #19: after a forward step of the wall clock (NTP, a resumed VM) every log
    # looked an hour old and a healthy app was stopped; idleness is on the monotonic clock
    app = FilesApp(tmp_path)
    app.quiet_for(0.0)
    dog = watchdog.Watchdog(app, 10.0, "stop")
    assert dog.tick() is None
    app.quiet_for(3600.0)  # the same files, an hour older than the (stepped) wall clock
    assert dog.tick() is None and app.done == []
    assert watchdog.read_record(tmp_path) is None
