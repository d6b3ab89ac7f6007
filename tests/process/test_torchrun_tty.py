"""`trainlaunch torchrun` on a terminal: the ranks get one each, as under torchrun (issue 22 #24).

Under torchrun in a terminal a rank's ``isatty()`` is True, so tqdm draws its bar in place;
under `trainlaunch torchrun` it was False and the bar stayed blank until its final line. Here
the command runs on a real pseudo-terminal (``os.openpty``): both ranks see a terminal of the
command's size, the bar shows on the command's terminal before its line ends, and `logs`
keeps one readable final state per rank (``--raw``: every drawing). Pipes stay as they were.
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.conftest import CLI, processes_with_env, wait_until

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ddp"
PROGRESS = str(FIXTURES / "progress.py")


class Terminal:
    """The command on a pseudo-terminal of 120 columns, its screen's bytes read as they come."""

    def __init__(self, cli: CLI, argv: list[str], env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trainlaunch", *argv],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**cli.env, **env},
            cwd=cli.cwd,
            start_new_session=True,
        )
        self.path = os.ttyname(slave)
        os.close(slave)
        self.screen = b""

    def read_until(self, want: bytes, timeout: float = 90) -> None:
        """Read the terminal until want appeared (fail after timeout)."""
        deadline = time.monotonic() + timeout
        while want not in self.screen:
            left = deadline - time.monotonic()
            assert left > 0, f"never shown: {want!r}; the screen: {self.screen!r}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    self.screen += os.read(self.master, 1 << 16)
                except OSError:  # EIO: every writer closed it
                    break
        assert want in self.screen, f"never shown: {want!r}; the screen: {self.screen!r}"

    def wait(self, timeout: float = 90) -> int:
        """The command's exit code, and everything it left on the terminal read."""
        code = self.proc.wait(timeout=timeout)
        while select.select([self.master], [], [], 0.2)[0]:
            try:
                data = os.read(self.master, 1 << 16)
            except OSError:
                break
            if not data:
                break
            self.screen += data
        os.close(self.master)
        return code


def test_ranks_get_a_terminal_and_the_bar_renders_live(cli: CLI, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    term = Terminal(cli, ["torchrun", "--nproc-per-node", "2", PROGRESS], {"GATE": str(gate)})
    try:
        for rank in (0, 1):  # drawn before the line ended: live, as a terminal shows it
            term.read_until(f"\rrank {rank} step 1/3".encode())
        gate.touch()
        assert term.wait() == 0, term.screen
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    screen = term.screen.decode()
    for rank in (0, 1):
        assert f"rank {rank} isatty stdout=True stderr=True" in screen, screen
        assert f"rank {rank} columns 120" in screen, screen  # the command's terminal's size
        assert f"\rrank {rank} step 3/3" in screen
        assert f"\x1b[32mrank {rank} done\x1b[0m" in screen  # colours pass through
        assert screen.count(f"rank {rank} isatty") == 1, screen  # shown once, not again
    handle = screen.split("trainlaunch: ", 1)[1].split()[0]
    logs = cli("logs", handle, check=True).stdout
    for rank in (0, 1):  # the final state, once per rank, with its rank
        assert logs.count(f"rank {rank} step") == 1, logs
        assert f"[progress/0 rank {rank}] rank {rank} step 3/3\n" in logs, logs
    raw = _bytes(cli, "logs", "--raw", handle).stdout  # every drawing, as the rank wrote it
    assert b"[default1]:\rrank 1 step 1/3\rrank 1 step 2/3\rrank 1 step 3/3\n" in raw, raw


def _bytes(
    cli: CLI, *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The CLI's output as bytes (text mode would turn each \r into a newline)."""
    return subprocess.run(
        [sys.executable, "-m", "trainlaunch", *argv],
        capture_output=True,
        env={**cli.env, **(env or {})},
        cwd=cli.cwd,
        timeout=120,
        check=True,
    )


def _holding(path: str, pids: list[int]) -> list[int]:
    """Those of pids that have path open."""
    out = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                    out.append(pid)
                    break
            except OSError:
                continue
    return out


def test_a_killed_command_gets_its_terminal_back(cli: CLI, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    term = Terminal(cli, ["torchrun", "--nproc-per-node", "1", PROGRESS], {"GATE": str(gate)})
    try:
        term.read_until(b"\rrank 0 step 1/3")
        handle = term.screen.decode().split("trainlaunch: ", 1)[1].split()[0]
        app = processes_with_env("TRAINLAUNCH_APP_ID", handle.rsplit("/", 1)[1])
        assert _holding(term.path, app), "the agent writes to the command's terminal"
        term.proc.kill()  # the shell has its terminal back: the app must stop writing there
        term.proc.wait(timeout=30)  # the terminal stays (its master open: the test's)
        wait_until(
            lambda: not _holding(term.path, app), what="the app to close the command's terminal"
        )
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
        term.wait()
    gate.touch()
    assert cli.wait(handle)["state"] == "SUCCEEDED"  # the run goes on, recorded
    assert "[progress/0 rank 0] rank 0 step 3/3\n" in cli("logs", handle, check=True).stdout


def test_pipes_stay_pipes(cli: CLI, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    proc = _bytes(cli, "torchrun", "--nproc-per-node", "2", PROGRESS, env={"GATE": str(gate)})
    lines = sorted(ln for ln in proc.stdout.splitlines() if b"isatty" in ln)
    assert lines == [f"rank {r} isatty stdout=False stderr=False".encode() for r in (0, 1)]
    assert b"\rrank 0 step 1/3\rrank 0 step 2/3\rrank 0 step 3/3\n" in proc.stderr  # as written
    handle = proc.stderr.decode().split("trainlaunch: ", 1)[1].split()[0]
    assert "TRAINLAUNCH_TTY" not in cli("describe", handle, check=True).stdout
