"""Sweeps on the local backend through the real CLI: a 3x2 grid limited to 2 at a time."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import CLI, wait_until
from trainlaunch.runner import get_runner

FIXTURE = Path(__file__).parent.parent / "fixtures" / "sweep" / "train_tiny.py"
LRS = ("0.3", "0.1", "0.03")


def _points(cli: CLI, sweep_id: str) -> list[dict]:
    return json.loads((cli.home / "sweeps" / sweep_id / "sweep.json").read_text())["points"]


@pytest.mark.slow  # ~40 s on a loaded 2-core machine (6 apps, 3 waves)
def test_grid_runs_at_most_two_at_once_and_compares(cli: CLI) -> None:
    out = cli(
        "sweep", "--param", f"lr={','.join(LRS)}", "--seeds", "1,2", "--max-parallel", "2",
        "utils.python", str(FIXTURE), "--lr", "{lr}", "--steps", "5", "--step-time", "0.3",
        check=True,
    )  # fmt: skip
    handle = out.stdout.strip()
    assert handle.startswith("local://") and "/sweep:" in handle, out.stdout
    sweep_id = handle.rsplit(":", 1)[1]
    points = _points(cli, sweep_id)  # the CLI has exited: the queue lives on without it
    assert [(p["params"]["lr"], p["seed"]) for p in points] == [
        (lr, s) for lr in LRS for s in (1, 2)
    ]
    handles = [p["handle"] for p in points]
    seen_running, seen_queued, terminal = 0, False, set()
    with get_runner(environ=cli.env) as runner:
        deadline = time.monotonic() + 120
        while len(terminal) < len(handles):
            states = {h: runner.status(h).state.name for h in handles}
            running = sum(s == "RUNNING" for s in states.values())
            assert running <= 2, states
            seen_running = max(seen_running, running)
            seen_queued |= running == 2 and "PENDING" in states.values()
            terminal = {h for h, s in states.items() if s in ("SUCCEEDED", "FAILED", "CANCELLED")}
            assert time.monotonic() < deadline, states
            time.sleep(0.05)
        assert {runner.status(h).state.name for h in handles} == {"SUCCEEDED"}
    assert seen_running == 2 and seen_queued  # the limit was reached and others waited

    listing = cli("list", "--sweep", sweep_id, "--json", check=True)
    rows = json.loads(listing.stdout)["points"]
    assert [r["state"] for r in rows] == ["SUCCEEDED"] * 6
    assert cli("wait", handle).returncode == 0
    assert cli("status", handle, check=True).stdout.startswith(f"{handle}\tSUCCEEDED=6")

    table = json.loads(cli("metrics", handle, "--json", check=True).stdout)["apps"]
    assert [r["handle"] for r in table] == handles
    for row, point in zip(table, points, strict=True):
        own = json.loads(cli("metrics", point["handle"], "--json", check=True).stdout)
        assert row["last"]["loss"] == own["latest"]["0"]["loss"]
        assert row["params"] == {"lr": point["params"]["lr"], "seed": point["seed"]}
        assert row["steps"] == 5
        assert row["best"]["loss"] <= row["last"]["loss"]
    init = {(r["params"]["lr"], r["params"]["seed"]): r["last"]["init_loss"] for r in table}
    for lr in LRS:  # the data come from the injected seed only
        assert init[(lr, 1)] == init[(LRS[0], 1)] and init[(lr, 2)] == init[(LRS[0], 2)]
    assert init[(LRS[0], 1)] != init[(LRS[0], 2)]
    text = cli("metrics", handle, "--metric", "loss", check=True).stdout
    assert text.splitlines()[0].split("\t") == [
        "handle", "lr", "seed", "steps", "loss.last", "loss.best"
    ]  # fmt: skip
    assert len([ln for ln in text.splitlines() if ln.startswith("local://")]) == 6
    assert "* lr=0.3 seed=1" in text  # the overlay chart's legend
    logs = cli("logs", handle, check=True).stdout
    assert logs.count("==> local://") == 6 and "final loss=" in logs


def test_stop_sweep_cancels_queued_and_running(cli: CLI) -> None:
    handle = cli(
        "sweep", "--param", "t=30,31,32", "--max-parallel", "1",
        "utils.sh", "sleep {t}", check=True,
    ).stdout.strip()  # fmt: skip
    handles = [p["handle"] for p in _points(cli, handle.rsplit(":", 1)[1])]
    with get_runner(environ=cli.env) as runner:
        wait_until(lambda: any(runner.status(h).state.name == "RUNNING" for h in handles), 60)
    stopped = cli("stop", handle, check=True)
    assert stopped.stdout.startswith(f"{handle}\tCANCELLED=3"), stopped.stdout
    assert cli("wait", handle).returncode == 6


def test_bad_sweeps_are_usage_errors(cli: CLI) -> None:
    bad = cli("sweep", "--param", "lr=0.1,0.2", "utils.sh", "echo {lrr}")
    assert bad.returncode == 2 and "unknown placeholder {lrr}" in bad.stderr
    assert "did you mean {lr}" in bad.stderr and "Traceback" not in bad.stderr
    bad = cli("sweep", "--param", "lr=0.1,0.2", "utils.sh", "echo hi")
    assert bad.returncode == 2 and "--param lr is not used" in bad.stderr
    bad = cli("sweep", "--param", "lr=1e-4:1e-1:log", "utils.sh", "echo {lr}")
    assert bad.returncode == 2 and "--random" in bad.stderr
    bad = cli("status", "sweep:abcdefghij")
    assert bad.returncode == 4, bad.stderr


def test_dryrun_lists_points_and_submits_nothing(cli: CLI) -> None:
    out = cli(
        "sweep", "--dryrun", "--param", "lr=1e-4:1e-1:log", "--random", "3", "--seeds", "7",
        "utils.sh", "echo {lr} {{x}}", check=True,
    ).stdout  # fmt: skip
    assert out.count("# point ") == 3 and "seed=7" in out and "{x}" in out
    assert not (cli.home / "sweeps").exists() or not any((cli.home / "sweeps").iterdir())


def test_killed_supervisor_frees_its_slot(cli: CLI) -> None:
    handle = cli(
        "sweep", "--param", "t=30,31", "--max-parallel", "1", "utils.sh", "sleep {t}", check=True
    ).stdout.strip()  # fmt: skip
    handles = [p["handle"] for p in _points(cli, handle.rsplit(":", 1)[1])]
    with get_runner(environ=cli.env) as runner:

        def states() -> dict[str, str]:
            return {h: runner.status(h).state.name for h in handles}

        wait_until(lambda: "RUNNING" in states().values(), timeout=60)
        first = next(h for h, s in states().items() if s == "RUNNING")
        second = next(h for h in handles if h != first)
        # its supervisor is up and waits for the slot (SUBMITTED until the supervisor starts)
        wait_until(lambda: runner.status(second).state.name == "PENDING", timeout=60)
        assert runner.status(first).state.name == "RUNNING"
        app_dir = cli.home / "apps" / first.rsplit("/", 1)[1]
        os.kill(json.loads((app_dir / "supervisor.json").read_text())["pid"], signal.SIGKILL)
        # the kernel drops the killed supervisor's slot lock: the queued point starts
        wait_until(lambda: runner.status(second).state.name == "RUNNING", timeout=60)
    cli("stop", handle, check=True)


WAIT_FOR_FLAG = """\
import pathlib, sys, time
print("code {version} point", sys.argv[1], flush=True)
flag = pathlib.Path(sys.argv[2])
while not flag.exists():  # the test edits this script, then creates the flag
    time.sleep(0.02)
"""


@pytest.mark.parametrize("flag,expected", [((), "A"), (("--no-snapshot",), "B")])
def test_a_queued_point_runs_the_code_of_the_submission(
    cli: CLI, tmp_path: Path, flag: tuple[str, ...], expected: str
) -> None:
    """Issue 16: with --max-parallel, local points wait; by default they run a snapshot."""
    work = tmp_path / "proj"
    work.mkdir()
    script = work / "train.py"
    script.write_text(WAIT_FOR_FLAG.format(version="A"))
    release = tmp_path / "release"
    out = cli(
        "sweep", "--param", "x=1,2", "--max-parallel", "1", *flag,
        "utils.python", "train.py", "{x}", str(release), cwd=work, check=True,
    )  # fmt: skip
    handle = out.stdout.strip()
    handles = [p["handle"] for p in _points(cli, handle.rsplit(":", 1)[1])]

    def started() -> list[str]:  # the point that took the slot (not always point 1) has printed
        return [h for h in handles if "point" in cli("logs", h).stdout]

    first = wait_until(started, timeout=60)[0]
    second = next(h for h in handles if h != first)
    with get_runner(environ=cli.env) as runner:
        assert runner.status(second).state.name in ("SUBMITTED", "PENDING")
    script.write_text(WAIT_FOR_FLAG.format(version="B"))  # an edit while the point waits
    release.touch()
    assert cli("wait", handle).returncode == 0
    assert "code A point" in cli("logs", first, check=True).stdout
    assert f"code {expected} point" in cli("logs", second, check=True).stdout
    described = cli("describe", second, check=True).stdout
    assert ("snapshot:" in described) == (expected == "A"), described


def test_a_mistyped_sweep_option_is_named_as_an_option(cli: CLI) -> None:
    """It used to be taken for the component: `no component named '--max-paralel'`."""
    out = cli("sweep", "--param", "x=1,2", "--max-paralel", "2", "utils.sh", "echo {x}")
    assert out.returncode == 2, out.stderr
    error, hint = out.stderr.splitlines()[:2]
    assert error == "error: unknown option '--max-paralel' of `trainlaunch sweep`", out.stderr
    assert "did you mean '--max-parallel'" in hint, out.stderr
