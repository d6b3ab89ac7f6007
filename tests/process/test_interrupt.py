"""Ctrl-C on a command that runs an app in the foreground reaches the ranks as torchrun passes
it on (issue 22 #23): SIGINT first, so their ``except KeyboardInterrupt`` runs; SIGTERM to
those still running after the grace period; SIGKILL a few seconds later (docs/ddp.md,
docs/cli.md). SIGTERM to the command still stops the app with SIGTERM.

The command gets its Ctrl-C as a terminal gives it: SIGINT to its foreground process group
(here: the command leads a session of its own, and os.killpg signals that group), once every
rank has said it is ready (its pid file is written inside its ``try``). Before this, the ranks
got SIGTERM: no ``KeyboardInterrupt handled`` line, ``got SIGTERM`` instead.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import CLI, pids_alive, processes_with_env, wait_until

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ddp"
SCRIPT = str(FIXTURES / "interrupted.py")  # "rank N ready", then waits for its signal


def _start(cli: CLI, *args: str) -> subprocess.Popen[str]:
    return cli.popen(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _ready(proc: subprocess.Popen[str], pid_dir: Path, n: int) -> list[int]:
    """The ranks' pids once all n said they are ready (the command must still be running)."""

    def found() -> list[Path] | None:
        if proc.poll() is not None:
            raise AssertionError(f"the command exited {proc.returncode}: {proc.communicate()}")
        files = list(pid_dir.glob("*.pid"))
        return files if len(files) == n else None

    return [int(f.read_text()) for f in wait_until(found, timeout=60, what=f"{n} ranks ready")]


def _signal(proc: subprocess.Popen[str], sig: int) -> tuple[int, str, str, float]:
    """sig to the command's process group (Ctrl-C: SIGINT); its exit code, stdout, stderr and
    how long it took to exit."""
    t0 = time.monotonic()
    os.killpg(proc.pid, sig)
    try:
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err, time.monotonic() - t0


def _gone(cli: CLI, handle: str, pids: list[int]) -> dict[str, object]:
    """Nothing of the app is left the moment the command has exited; its final status."""
    assert pids_alive(pids) == [], "the command exited before every rank was gone"
    assert processes_with_env("TRAINLAUNCH_APP_ID", handle.rsplit("/", 1)[1]) == []
    return cli.status(handle)


def _said(text: str, what: str, ranks: int = 2) -> bool:
    return all(f"rank {r} {what}" in text for r in range(ranks))


@pytest.mark.parametrize("ignore", ["", "IGNORE_INT", "IGNORE_INT,IGNORE_TERM"])
def test_ctrl_c_on_trainlaunch_torchrun_reaches_the_ranks_as_sigint(
    cli: CLI, tmp_path: Path, ignore: str
) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    cli.env.update({"PID_DIR": str(pid_dir), **{k: "1" for k in ignore.split(",") if k}})
    proc = _start(cli, "torchrun", "--nproc-per-node", "2", "--shutdown-timeout", "1", SCRIPT)
    pids = _ready(proc, pid_dir, 2)

    code, out, err, took = _signal(proc, signal.SIGINT)

    assert code == 130, err
    assert "Traceback" not in err, err
    handle = re.search(r"trainlaunch: (local://\S+)", err).group(1)  # type: ignore[union-attr]
    # the console shows what the ranks' handlers printed, as torchrun's does
    assert _said(out, "KeyboardInterrupt handled"), (out, err)
    status = _gone(cli, handle, pids)
    assert status["state"] == "CANCELLED"
    logs = cli("logs", handle, check=True).stdout
    if not ignore:
        assert not re.search("SIGTERM", out + logs), out
        assert status["exit_code"] == 130  # the agent's, after its ranks' own exit 130
    elif ignore == "IGNORE_INT":  # SIGTERM once the agent's --shutdown-timeout is over
        assert _said(out, "got SIGTERM"), out
    else:  # and SIGKILL min(--shutdown-timeout, 5 s) later
        assert not re.search("got SIGTERM", out), out
        assert took < 30, f"stopping took {took:.1f}s (--shutdown-timeout 1)"


def _run_wait(
    cli: CLI, pid_dir: Path, env: str, *args: str, grace: str = "10"
) -> subprocess.Popen[str]:
    return _start(
        cli, "run", "--wait", "--cfg", f"grace_period={grace}", *args[:1],
        "--env", f"PID_DIR={pid_dir}{env}", *args[1:],
    )  # fmt: skip


def test_ctrl_c_on_run_wait_reaches_the_ranks_as_sigint(cli: CLI, tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    proc = _run_wait(cli, pid_dir, "", "dist.ddp", "--nproc-per-node", "2", SCRIPT)
    pids = _ready(proc, pid_dir, 2)

    code, out, err, _ = _signal(proc, signal.SIGINT)

    assert code == 130, err
    handle = out.split()[0]
    status = _gone(cli, handle, pids)
    assert status["state"] == "CANCELLED" and status["exit_code"] == 130, status
    logs = cli("logs", handle, check=True).stdout
    assert _said(logs, "KeyboardInterrupt handled"), logs
    assert "SIGTERM" not in logs, logs
    assert "interrupted by Ctrl-C (SIGINT to every replica" in cli("status", handle).stdout


def test_a_rank_that_ignores_sigint_gets_sigterm_after_the_grace_period(
    cli: CLI, tmp_path: Path
) -> None:
    # the app's grace period (1 s) is shorter than the agent's --shutdown-timeout (30 s): the
    # supervisor's second SIGINT moves the agent on to SIGTERM (a SIGTERM it would ignore)
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    proc = _run_wait(
        cli, pid_dir, ",IGNORE_INT=1", "dist.ddp", "--nproc-per-node", "2", SCRIPT, grace="1"
    )
    pids = _ready(proc, pid_dir, 2)

    code, out, err, took = _signal(proc, signal.SIGINT)

    assert code == 130, err
    handle = out.split()[0]
    assert _gone(cli, handle, pids)["state"] == "CANCELLED"
    logs = cli("logs", handle, check=True).stdout
    assert _said(logs, "KeyboardInterrupt handled") and _said(logs, "got SIGTERM"), logs
    assert took < 20, f"stopping took {took:.1f}s (grace period 1s)"


@pytest.mark.parametrize("ignore", ["", ",IGNORE_INT=1", ",IGNORE_INT=1,IGNORE_TERM=1"])
def test_ctrl_c_on_run_wait_reaches_a_plain_script_as_sigint(
    cli: CLI, tmp_path: Path, ignore: str
) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    proc = _run_wait(cli, pid_dir, ",RANK=0" + ignore, "utils.python", SCRIPT, grace="1")
    pids = _ready(proc, pid_dir, 1)

    code, out, err, took = _signal(proc, signal.SIGINT)

    assert code == 130, err
    handle = out.split()[0]
    status = _gone(cli, handle, pids)
    assert status["state"] == "CANCELLED"
    logs = cli("logs", handle, check=True).stdout
    assert _said(logs, "KeyboardInterrupt handled", 1), logs
    if not ignore:
        assert "SIGTERM" not in logs and status["exit_code"] == 130, (logs, status)
    elif "IGNORE_TERM" not in ignore:  # SIGTERM after the grace period
        assert _said(logs, "got SIGTERM", 1) and status["exit_code"] == 143, (logs, status)
    else:  # SIGKILL min(grace period, 5 s) after that
        assert status["exit_code"] == 137, status
        assert took < 20, f"stopping took {took:.1f}s (grace period 1s)"


def test_sigterm_to_run_wait_still_stops_the_ranks_with_sigterm(cli: CLI, tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    proc = _run_wait(cli, pid_dir, "", "dist.ddp", "--nproc-per-node", "2", SCRIPT)
    pids = _ready(proc, pid_dir, 2)

    code, out, err, _ = _signal(proc, signal.SIGTERM)

    assert code == 130, err
    handle = out.split()[0]
    assert _gone(cli, handle, pids)["state"] == "CANCELLED"
    logs = cli("logs", handle, check=True).stdout
    assert _said(logs, "got SIGTERM") and "KeyboardInterrupt" not in logs, logs
