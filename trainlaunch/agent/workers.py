"""Starting and stopping worker processes (the port reservation lives in trainlaunch.node.processes).

Workers start as torchrun starts them (own session, so a signal reaches each whole process
group) and additionally die with the agent: ``PR_SET_PDEATHSIG=SIGKILL`` on Linux, so no
rank outlives an agent that was SIGKILLed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence

from trainlaunch.node.processes import killpg, reserve_port  # noqa: F401 (reserve_port: the agent's API)

_PR_SET_PDEATHSIG = 1

USER_UMASK = 0o022  # set by main() to the umask the agent was started with (ranks keep it)


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn setting PR_SET_PDEATHSIG=SIGKILL (None where prctl does not exist)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if os.getppid() != parent:  # the agent died before prctl: do not run orphaned
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


class Worker:
    """One running (or finished) worker process."""

    def __init__(
        self,
        local_rank: int,
        rank: int,
        proc: subprocess.Popen[bytes],
        started: float,
        ptys: dict[int, int] | None = None,
    ) -> None:
        self.local_rank = local_rank
        self.rank = rank
        self.proc = proc
        self.started = started
        self.exit_code: int | None = None  # Popen's convention: -N when killed by signal N
        self.ended: float | None = None
        self.peak_rss: int | None = None  # bytes: its largest resident set (wait4), once reaped
        self.ptys: dict[int, int] = ptys or {}  # stream -> pty master
        self._ticks: int | None = None

    def __repr__(self) -> str:
        return f"Worker(local_rank={self.local_rank}, rank={self.rank}, pid={self.proc.pid})"

    def output_fd(self, std: int) -> int:
        """Where the agent reads one of its streams (1: stdout, 2: stderr): a pipe or a pty."""
        if std in self.ptys:
            return self.ptys[std]
        pipe = self.proc.stdout if std == 1 else self.proc.stderr
        assert pipe is not None
        return pipe.fileno()

    @property
    def ticks(self) -> int | None:
        """Start time in clock ticks (tells a reused pid apart); read after all spawns."""
        if self._ticks is None and self.exit_code is None:
            from trainlaunch.node.processes import start_ticks

            self._ticks = start_ticks(self.proc.pid)
        return self._ticks

    @property
    def pid(self) -> int:
        """Process id (= its process group id: each worker leads its own session)."""
        return self.proc.pid

    def poll(self) -> bool:
        """Reap if it exited (wait4: its peak memory comes with its status); True when it has."""
        if self.exit_code is None and self.proc.returncode is None:
            try:
                pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: Popen knows the code
                pid, status, usage = 0, 0, None
                self.proc.poll()
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                self.peak_rss = usage.ru_maxrss * 1024 if usage is not None else None  # KiB
        if self.exit_code is None and self.proc.returncode is not None:
            self.exit_code, self.ended = self.proc.returncode, time.time()
        return self.exit_code is not None

    def signal_group(self, sig: int) -> None:
        """Send sig to the worker's process group (its children too), if any is left."""
        killpg(self.proc.pid, sig)


class Spawner:
    """Starts workers with pipes for both streams; the preexec hook is built once."""

    def __init__(self, ignored: tuple[int, ...] = ()) -> None:
        die = _die_with_parent()
        self.preexec: Callable[[], None] | None = die
        if not ignored:
            return

        def preexec() -> None:
            # the agent catches the warning signals to forward them; a worker keeps the
            # disposition the agent inherited (ignored: it dies only if it asks to)
            for sig in ignored:
                signal.signal(sig, signal.SIG_IGN)
            if die is not None:
                die()

        self.preexec = preexec

    def start(
        self,
        local_rank: int,
        rank: int,
        cmd: Sequence[str],
        env: Mapping[str, str],
        ptys: Mapping[int, tuple[int, int]] | None = None,
    ) -> Worker:
        """Start one worker in its own session with stdout/stderr piped to the agent, or
        written into a pseudo-terminal (ptys: stream -> (master, slave); agent/terminal.py)."""
        ptys = ptys or {}
        try:
            proc = subprocess.Popen(
                list(cmd),
                env=dict(env),
                stdout=ptys[1][1] if 1 in ptys else subprocess.PIPE,
                stderr=ptys[2][1] if 2 in ptys else subprocess.PIPE,
                start_new_session=True,  # a session without a controlling terminal, as torchrun's
                preexec_fn=self.preexec,
                umask=USER_UMASK,
            )
        except OSError as e:
            for master, _ in ptys.values():
                os.close(master)
            raise WorkerStartError(
                f"cannot start {cmd[0]!r}: {e.strerror or e}",
                127 if isinstance(e, FileNotFoundError) else 126,
            ) from None
        finally:
            for _, slave in ptys.values():  # the worker holds it: its exit ends the stream
                os.close(slave)
        masters = {std: master for std, (master, _) in ptys.items()}
        return Worker(local_rank, rank, proc, time.time(), ptys=masters)


class WorkerStartError(Exception):
    """The worker command could not be executed (the shell's 127/126)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
