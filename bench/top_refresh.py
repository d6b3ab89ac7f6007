"""What `trainlaunch top` costs while it watches many running apps (docs/top.md, "Cost").

Starts N local apps in a private app store (``--kind sleep``: ``utils.sleep``, one process
each; ``--kind metrics``: ``utils.python`` of a script that logs a metrics record every 0.2 s,
so each refresh also reads a metrics file's end), then measures

1. the CPU time of one refresh of the app list: ``board.apps.overview`` (and the sweeps
   list), as `top` calls it, with one Runner and one RateBook carried from refresh to refresh;
2. the whole `top` app, headless (Textual's test driver: no terminal output), refreshing
   every ``--interval`` for ``--seconds``: its process's CPU time over that wall time.

Both as a share of one core at the interval. The apps are stopped and the store removed at
the end, whatever happened. Usage::

    python bench/top_refresh.py [--apps 100] [--refreshes 20] [--interval 2] [--kind sleep]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LOGGER = """\
import json, os, time
path = os.path.join(os.environ["TRAINLAUNCH_METRICS_PATH"], "rank0.jsonl")
os.makedirs(os.path.dirname(path), exist_ok=True)
step = 0
with open(path, "a") as out:
    while True:
        step += 1
        out.write(json.dumps({"step": step, "time": time.time(), "loss": 1 / step}) + "\\n")
        out.flush()
        time.sleep(0.2)
"""


def start_apps(runner: Any, n: int, kind: str, scratch: Path, handles: list[str]) -> None:
    """N running apps, appended to handles as they start (every one RUNNING on return)."""
    script = scratch / "logger.py"
    script.write_text(LOGGER)  # once: an app must never start while it is being written
    for _ in range(n):
        if kind == "sleep":
            handles.append(runner.run_component("utils.sleep", ["--seconds", "600"]))
        else:
            handles.append(runner.run_component("utils.python", ["--script", str(script)]))
    mine = set(handles)
    deadline = time.monotonic() + 300
    while {r.state.name for r in runner.list_apps("local") if r.app_handle in mine} != {"RUNNING"}:
        if time.monotonic() > deadline:
            raise SystemExit("the apps did not all reach RUNNING in 300 s")
        time.sleep(0.2)


def board_refreshes(runner: Any, refreshes: int) -> list[float]:
    """CPU seconds of each refresh of the app list (after one to warm imports and caches)."""
    from trainlaunch.cli.board.apps import overview
    from trainlaunch.cli.board.rates import RateBook
    from trainlaunch.cli.board.sweep import sweeps

    rates = RateBook()
    overview(runner, ["local"], rates, None, default_metric=True)
    cpu = []
    for _ in range(refreshes):
        time.sleep(0.25)  # pacing, so each refresh computes rates as `top` does
        t0 = time.process_time()
        doc = overview(runner, ["local"], rates, None, default_metric=True)
        sweeps()
        cpu.append(time.process_time() - t0)
        assert sum(r["running"] for r in doc["apps"]) >= len(doc["apps"]) - 20, doc["notes"]
    return cpu


async def whole_app(runner: Any, interval: float, seconds: float) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of the `top` app refreshing for a while, headless."""
    from trainlaunch.cli.top.app import Top

    app = Top(runner, ["local"], None, interval)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause(interval)  # the first reading and imports are not the steady state
        t0, w0 = time.process_time(), time.monotonic()
        await pilot.pause(seconds)
        return time.process_time() - t0, time.monotonic() - w0


def main() -> None:
    """Start the apps, measure, stop them, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=100)
    parser.add_argument("--refreshes", type=int, default=20)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--seconds", type=float, default=20.0, help="of the whole app")
    parser.add_argument("--kind", choices=("sleep", "metrics"), default="sleep")
    opts = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="top-bench-"))
    os.environ["TRAINLAUNCH_HOME"] = str(scratch / "home")
    os.environ["TRAINLAUNCH_CONFIG"] = ""
    from trainlaunch.runner import get_runner

    handles: list[str] = []
    try:
        with get_runner() as runner:
            t = time.monotonic()
            start_apps(runner, opts.apps, opts.kind, scratch, handles)
            print(
                f"{len(handles)} {opts.kind} apps running ({time.monotonic() - t:.0f} s to start)"
            )
            cpu = board_refreshes(runner, opts.refreshes)
            app_cpu, app_wall = asyncio.run(whole_app(runner, opts.interval, opts.seconds))
    finally:
        with get_runner() as runner:
            runner.cancel_many(handles)
        shutil.rmtree(scratch, ignore_errors=True)
    med = statistics.median(cpu)
    print(
        f"| what ({opts.apps} running {opts.kind} apps, every {opts.interval:g} s) | CPU | share of a core |"
    )
    print("| --- | --- | --- |")
    print(
        f"| one refresh of the app list (board.apps.overview + sweeps), median of {len(cpu)} "
        f"| {med * 1000:.0f} ms (max {max(cpu) * 1000:.0f} ms) | {med / opts.interval:.1%} |"
    )
    print(
        f"| the whole `top` app, headless, {app_wall:.0f} s "
        f"| {app_cpu:.2f} s | {app_cpu / app_wall:.1%} |"
    )
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
