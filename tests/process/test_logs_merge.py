"""Many ranks, one story: `logs` merges what ranks share and never holds back an error.

Real local dist.ddp apps (torch-free ranks: tests/fixtures/ddp/many.py) read through the CLI.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import CLI, wait_until

MANY = Path(__file__).resolve().parents[1] / "fixtures" / "ddp" / "many.py"


def on_a_terminal(cli: CLI, *args: str) -> list[str]:
    """The CLI's stdout when it is a terminal (a pty), colours taken out, empty lines dropped."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainlaunch", *args], stdout=slave, env=cli.env, cwd=cli.cwd
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the other side closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=60) == 0
    text = re.sub(r"\x1b\[[0-9;]*m", "", b"".join(chunks).decode())
    return [ln for ln in text.replace("\r\n", "\n").split("\n") if ln]


def test_eight_ranks_one_warning_and_eight_losses(cli: CLI) -> None:
    run = cli("run", "--wait", "dist.ddp", "--nproc", "8", str(MANY), "warn", "2", timeout=180)
    assert run.returncode == 0, run.stderr
    handle = run.stdout.strip()
    lines = cli("logs", "--merge", handle, check=True).stdout.splitlines()
    warnings = [ln for ln in lines if "UserWarning" in ln]
    assert warnings == [
        f"[many/0 ranks 0-7] {MANY}:15: UserWarning: the same warning from every rank"
    ]
    for epoch in (0, 1):
        assert lines.count(f"[many/0 ranks 0-7] Epoch {epoch}: starting") == 1
        losses = [ln for ln in lines if re.fullmatch(rf"\[many/0 rank \d\] loss {epoch}\.\d+", ln)]
        assert len(losses) == 8 and len({ln.split("]")[0] for ln in losses}) == 8
    fuzzy = cli("logs", "--merge=fuzzy", handle, check=True).stdout.splitlines()
    assert "[many/0 ranks 0-7] loss 0.410..0.438" in fuzzy
    one = cli("logs", "--merge", "--ranks", "0", handle, check=True).stdout.splitlines()
    assert [ln for ln in one if "loss" in ln] == [
        "[many/0 rank 0] loss 0.410",
        "[many/0 rank 0] loss 1.410",
    ]
    assert any("ranks 0-7" in ln and "UserWarning" in ln for ln in one)  # every rank's warning
    every = cli("logs", "--no-merge", handle, check=True).stdout.splitlines()
    assert sum("UserWarning" in ln for ln in every) == 8
    assert cli("logs", handle, check=True).stdout.splitlines() == every  # a pipe: every line
    shown = on_a_terminal(cli, "logs", handle)  # a person: merged, as --merge
    assert shown == [ln for ln in lines if ln], shown
    rows = [
        json.loads(x)
        for x in cli("logs", "--merge", "--json", handle, check=True).stdout.splitlines()
    ]
    [warn] = [r for r in rows if "UserWarning" in r["line"]]
    assert warn["ranks"] == list(range(8)) and warn["urgent"] is True


def test_a_traceback_shows_at_once_while_following_merged(cli: CLI, tmp_path: Path) -> None:
    go = tmp_path / "go"
    handle = cli.run("dist.ddp", "--nproc", "4", str(MANY), "traceback", str(go))
    follower = cli.popen("logs", "-f", "--merge", handle, stdout=-1, stderr=-1)
    try:
        assert follower.stdout is not None
        seen = []
        for line in follower.stdout:
            seen.append((time.time(), line))
            if "ValueError: boom written at" in line:
                break
        else:
            raise AssertionError(f"no traceback while following: {seen}")
        shown_at, line = seen[-1]
        written = float(line.rsplit(" ", 1)[1])
        # the app is still running (every rank waits for go): the line was not held to the end
        assert cli.status(handle)["state"] == "RUNNING"
        assert line.startswith("[many/0 rank 1] ValueError")
        print(f"traceback shown {shown_at - written:.3f}s after it was written")  # pytest -s
        assert shown_at - written < 1.0, f"{shown_at - written:.2f}s after it was written"
        assert any("Traceback (most recent call last):" in ln for _, ln in seen)
    finally:
        go.touch()
        assert cli.wait(handle, timeout=120)["state"] == "SUCCEEDED"
        wait_until(lambda: follower.poll() is not None, timeout=30, what="the follower to end")
