"""A terminal for the ranks of ``trainlaunch torchrun`` in the foreground, as torchrun gives.

Under torchrun in a terminal a rank's stdout and stderr *are* that terminal: ``isatty()`` is
True, so tqdm draws its bar in place and libraries colour their output. The agent's workers
write into pipes instead (the agent records every byte), so the same bars stayed blank until
their final line. When ``trainlaunch torchrun`` runs with its stdout (or stderr) on a
terminal it names that terminal in ``TRAINLAUNCH_TTY`` (settings.TTY: ``PID:TICKS:OUT:ERR``,
the command's pid and start ticks, then the terminal of each stream or nothing); the agent
then gives each local rank a pseudo-terminal per such stream (its size the terminal's) and
copies what the rank writes to that terminal as it arrives, a bar's carriage returns and
colours included, while recording the same bytes as before. The agent stops writing there
when the command is gone (a pidfd in the agent's selector); a stale value (a ``rerun`` of the
app) names a process that no longer runs and is ignored.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import selectors
import struct
import termios
from collections.abc import Callable, Mapping

from trainlaunch import settings
from trainlaunch.node.interleave import write_all
from trainlaunch.node.processes import start_ticks

OUT, ERR = 1, 2


def parse(value: str) -> tuple[int, int, dict[int, str]] | None:
    """``PID:TICKS:OUT:ERR`` -> (pid, ticks, {stream: terminal path}); None if malformed."""
    parts = value.split(":")
    if len(parts) != 4:
        return None
    try:
        pid, ticks = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    paths = {std: p for std, p in ((OUT, parts[2]), (ERR, parts[3])) if p}
    return (pid, ticks, paths) if paths else None


def value(pid: int, ticks: int, out: str, err: str) -> str:
    """The TRAINLAUNCH_TTY value for a command (pid, start ticks) and its streams' terminals."""
    return f"{pid}:{ticks}:{out}:{err}"


class Terminal:
    """The command's terminal, one descriptor per stream shown there, while the command runs."""

    def __init__(
        self, environ: Mapping[str, str], sel: selectors.BaseSelector, note: Callable[[str], None]
    ) -> None:
        self.sel = sel
        self.fds: dict[int, int] = {}
        self.owner = -1  # a pidfd on the command: readable once it has exited
        parsed = parse(environ.get(settings.TTY, ""))
        if parsed is None:
            return
        pid, ticks, paths = parsed
        if start_ticks(pid) != ticks:
            return  # the command is gone (a rerun of its app): nobody looks at that terminal
        opened: dict[str, int] = {}
        try:
            for std, path in paths.items():
                if path not in opened:
                    opened[path] = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
                self.fds[std] = opened[path]
        except OSError as e:
            for fd in opened.values():
                os.close(fd)
            self.fds = {}
            note(f"cannot show the ranks on the terminal ({e.strerror or e}): lines as they end")
            return
        with contextlib.suppress(OSError, AttributeError):  # no pidfd: never told it is gone
            self.owner = os.pidfd_open(pid)
            sel.register(self.owner, selectors.EVENT_READ, self)

    def __bool__(self) -> bool:
        return bool(self.fds)

    def fd(self, std: int) -> int:
        """Where a rank's stream is shown live (-1: not on a terminal)."""
        return self.fds.get(std, -1)

    def pty(self, std: int) -> tuple[int, int] | None:
        """A pseudo-terminal (master, slave) for one rank's stream, sized as the terminal, its
        output bytes passed unchanged (no ``\\n`` -> ``\\r\\n``: the terminal does that); None
        when that stream is not shown on a terminal."""
        fd = self.fds.get(std)
        if fd is None:
            return None
        master, slave = os.openpty()
        try:
            attrs = termios.tcgetattr(slave)
            attrs[1] &= ~termios.OPOST  # oflag: the bytes as the rank wrote them
            attrs[3] &= ~termios.ECHO  # lflag: nothing is typed into it
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
            size = fcntl.ioctl(fd, termios.TIOCGWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
            fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
        except OSError:
            pass  # a terminal without a size: the pty's default (0x0: tqdm falls back to 80)
        return master, slave

    def write(self, std: int, data: bytes) -> None:
        """Show a rank's bytes on the terminal as they came (nothing once it is gone)."""
        fd = self.fds.get(std)
        if fd is not None and not write_all(fd, data):
            self.close()  # the terminal hung up: the record still gets everything

    def on_ready(self, events: int) -> None:
        """The command exited: stop writing to its terminal (the shell has it back)."""
        self.close()

    def close(self) -> None:
        """Close the terminal's descriptors and the pidfd."""
        for fd in set(self.fds.values()):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()
        if self.owner >= 0:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(self.owner)
            os.close(self.owner)
            self.owner = -1
