"""The node agent forwards a warning signal (Slurm's --signal) to its workers without
stopping them, and holds it until a worker has installed its handler."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.conftest import CLI, wait_until
from trainlaunch.agent.node import workers

WORKER = """\
import os, signal, sys, time
from pathlib import Path

out = Path(sys.argv[1])
(out / "started").write_text(str(os.getpid()))
while not (out / "install").exists():
    time.sleep(0.02)
got = []
signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
deadline = time.monotonic() + 30
while not got and time.monotonic() < deadline:
    time.sleep(0.02)
print("worker got USR1" if got else "worker saw no USR1", flush=True)
"""


def test_warning_waits_for_the_workers_handler_and_does_not_stop_it(
    cli: CLI, tmp_path: Path
) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    handle = cli.run("dist.ddp", "-j", "1", str(script), str(tmp_path))
    try:
        wait_until((tmp_path / "started").exists, timeout=60, what="the worker")
        [agent] = [r["pid"] for role in cli.status(handle)["roles"] for r in role["replicas"]]
        os.kill(agent, signal.SIGUSR1)
        wait_until(
            lambda: (
                "got SIGUSR1: forwarding it to 1 worker (a warning:" in cli("logs", handle).stdout
            ),
            timeout=30,
            what="the agent to get the warning",
        )
        (tmp_path / "install").write_text("now")  # the handler comes after the warning
        status = cli.wait(handle)
    finally:
        cli("stop", handle)
    assert status["state"] == "SUCCEEDED", status
    assert "worker got USR1" in cli("logs", handle, check=True).stdout


def test_the_agent_counts_its_workers_in_words() -> None:
    # issue 22 #22: "forwarding it to all 1 workers"
    assert [workers(n, every=True) for n in (1, 2)] == ["1 worker", "all 2 workers"]
    assert [workers(n) for n in (0, 1, 3)] == ["0 workers", "1 worker", "3 workers"]
