"""Several CLIs stopping the same app at once: all succeed, the app ends CANCELLED, none left."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import CLI, pids_alive
from tests.faults.fault_helpers import (
    app_processes,
    kill9,
    running_replicas,
    supervisor_pid,
    wait_processes,
)


@pytest.mark.parametrize("supervisor", ["alive", "killed"])
def test_concurrent_stops(reaper: CLI, supervisor: str) -> None:
    cli = reaper
    handle = cli.run(
        "--cfg",
        "grace_period=1",
        "utils.sh",
        "--num-replicas",
        "2",
        "trap '' TERM; sleep 300 & wait",
    )
    running_replicas(cli, handle, 2)
    procs = wait_processes(handle, 4)
    if supervisor == "killed":
        kill9(supervisor_pid(cli, handle))

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: cli("stop", handle, timeout=60), range(4)))
    for r in results:
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr
        assert r.stdout.strip() == f"{handle}\tCANCELLED", r.stdout
    assert pids_alive(procs) == []
    assert app_processes(handle) == []
    final = cli.status(handle)
    assert final["state"] == "CANCELLED"
    assert {r["state"] for r in final["roles"][0]["replicas"]} == {"CANCELLED"}


@pytest.mark.slow
def test_stop_racing_the_natural_end(reaper: CLI) -> None:
    """An app that ends by itself while stops arrive ends in exactly one terminal state."""
    cli = reaper
    handles = [cli.run("utils.sh", "--num-replicas", "2", "sleep 0.3") for _ in range(3)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda h: cli("stop", h, timeout=60), handles * 2))
    for r in results:
        assert r.returncode == 0, r.stderr
    for h in handles:
        st = cli.status(h)
        assert st["state"] in ("SUCCEEDED", "CANCELLED"), st
        assert app_processes(h) == []
        # every replica agrees with the app
        states = {r["state"] for r in st["roles"][0]["replicas"]}
        assert states <= {"SUCCEEDED", "CANCELLED"}, st
