"""`logs -f SWEEP` on the local backend: every point followed at once, queued ones included."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import CLI, wait_until
from trainlaunch.runner import get_runner

# Each point says hello, waits for its go file (the test's condition, not a sleep), says bye.
SCRIPT = "echo hello {t}; while [ ! -e GO-{t} ]; do sleep 0.05; done; echo bye {t}"


def _start_sweep(cli: CLI, go: Path, max_parallel: int) -> tuple[str, list[str]]:
    handle = cli(
        "sweep", "--param", "t=aa,bb", "--max-parallel", str(max_parallel),
        "utils.sh", SCRIPT.replace("GO", str(go)), check=True,
    ).stdout.strip()  # fmt: skip
    record = cli.home / "sweeps" / handle.rsplit(":", 1)[1] / "sweep.json"
    return handle, [p["handle"] for p in json.loads(record.read_text())["points"]]


def _follow(cli: CLI, handle: str, out_path: Path) -> subprocess.Popen[str]:
    with open(out_path, "w") as out:
        return cli.popen("logs", "-f", handle, stdout=out, stderr=subprocess.PIPE)


def _finish(follower: subprocess.Popen[str]) -> str:
    try:
        _, err = follower.communicate(timeout=90)  # it ends by itself once every point ended
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    return err


def test_follow_picks_up_a_queued_point_and_exits_when_all_end(cli: CLI, tmp_path: Path) -> None:
    go = tmp_path / "go"
    handle, handles = _start_sweep(cli, go, max_parallel=1)
    with get_runner(environ=cli.env) as runner:

        def states() -> list[str]:
            return [runner.status(h).state.name for h in handles]

        # one point runs, the other waits for the only slot (which one is first come, first
        # served): the follower must pick the queued one up when it starts later
        wait_until(lambda: sorted(states()) == ["PENDING", "RUNNING"], 60, what="one running")
        ran, queued = ("aa", "bb") if states()[0] == "RUNNING" else ("bb", "aa")
        out_path = tmp_path / "follow.out"
        follower = _follow(cli, handle, out_path)
        wait_until(lambda: f"hello {ran}" in out_path.read_text(), 60, what="the first line")
        assert sorted(states()) == ["PENDING", "RUNNING"]
        (tmp_path / f"go-{ran}").touch()
        (tmp_path / f"go-{queued}").touch()  # the first ends; the other takes the slot
        _finish(follower)
        assert states() == ["SUCCEEDED", "SUCCEEDED"]
    assert out_path.read_text().splitlines() == [
        f"[t={ran}] sh/0 hello {ran}",
        f"[t={ran}] sh/0 bye {ran}",
        f"[t={queued}] sh/0 hello {queued}",
        f"[t={queued}] sh/0 bye {queued}",
    ]
    first, second = handles
    # without -f: each point in turn under its header; --json -f names each line's point
    assert cli("logs", handle, check=True).stdout.splitlines() == [
        f"==> {first} (t=aa) <==", "sh/0 hello aa", "sh/0 bye aa",
        f"==> {second} (t=bb) <==", "sh/0 hello bb", "sh/0 bye bb",
    ]  # fmt: skip
    out = cli("logs", "-f", "--json", handle, check=True).stdout
    assert {(d["handle"], d["point"], d["line"]) for d in map(json.loads, out.splitlines())} == {
        (first, "t=aa", "hello aa"), (first, "t=aa", "bye aa"),
        (second, "t=bb", "hello bb"), (second, "t=bb", "bye bb"),
    }  # fmt: skip


def test_follow_interleaves_running_points_in_arrival_order(cli: CLI, tmp_path: Path) -> None:
    go = tmp_path / "go"
    handle, _ = _start_sweep(cli, go, max_parallel=2)
    out_path = tmp_path / "follow.out"
    follower = _follow(cli, handle, out_path)
    both = ("[t=aa] sh/0 hello aa", "[t=bb] sh/0 hello bb")
    wait_until(lambda: all(x in out_path.read_text() for x in both), 60, what="both hellos")
    (tmp_path / "go-bb").touch()  # point 1 ends while point 0 still runs: its bye comes first
    wait_until(lambda: "[t=bb] sh/0 bye bb" in out_path.read_text(), 60, what="point 1's bye")
    assert "bye aa" not in out_path.read_text() and follower.poll() is None
    (tmp_path / "go-aa").touch()
    _finish(follower)
    assert out_path.read_text().splitlines()[2:] == ["[t=bb] sh/0 bye bb", "[t=aa] sh/0 bye aa"]
