"""The Slurm replica runner: one replica's command, its output in arrival order.

``python -m trainlaunch.schedulers.slurm.replica DIR COMMAND [ARGS...]`` runs where the
replica script used to run COMMAND itself: it reads the command's stdout and stderr pipes into
DIR's ``stdout.log``, ``stderr.log`` (every byte, appended) and ``combined.log`` (whole lines
of both in the order they arrived), exactly as the local supervisor does (node/interleave.py), and
exits with the command's exit code (128+N when signal N killed it), which the replica script
records. The command stays in the runner's process group and sees every signal Slurm sends
the step (scancel, ``--signal`` warnings, preemption) itself; the runner survives them (a
no-op handler, reset in the command; an ignored signal stays ignored for it) so that the
lines written after the signal, and the exit code, are still recorded. Stdlib-only and
torch-free: it runs with the python of the job's node agents (or of ``trainlaunch run``).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Sequence

from trainlaunch.node.exits import shell_code
from trainlaunch.node.interleave import Combined, Pump, open_logs, write_all

POLL_S = 0.2  # how often the runner checks whether the command ended (pipes still open)
SURVIVED = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGXCPU")


def survive_signals() -> None:
    """A no-op handler for what Slurm may send the whole step; ignored signals stay ignored."""
    for name in SURVIVED:
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, lambda _sig, _frame: None)


def exit_code(status: int) -> int:
    """A wait status as the shell reports it: the exit code, or 128+N for signal N."""
    return shell_code(os.waitstatus_to_exitcode(status))


def pump(pumps: Sequence[Pump], pid: int) -> int:
    """Copy the pipes until both end, or the command ended and they are empty; its exit code.

    A process the command left behind may hold the pipes open: once the command itself has
    ended, what the pipes hold is copied and the runner returns (the step then ends it).
    """
    sel = selectors.DefaultSelector()
    for p in pumps:
        sel.register(p.fd, selectors.EVENT_READ, p)
    status: int | None = None
    while sel.get_map():
        ready = sel.select(0 if status is not None else POLL_S)
        for key, _ in ready:
            p = key.data
            if not p.read():
                sel.unregister(p.fd)
                p.close()
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            status = st if done else None
        elif not ready:
            break  # ended, pipes drained: stragglers do not hold the replica open
    for p in pumps:
        p.close()
    if status is None:
        status = os.waitpid(pid, 0)[1]
    return exit_code(status)


def run(directory: str, cmd: Sequence[str]) -> int:
    """Run cmd with its output in directory's three log files; its exit code."""
    combined_fd, out, err = open_logs(directory)
    combined = Combined(combined_fd)
    (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
    try:
        proc = subprocess.Popen(list(cmd), stdout=out_w, stderr=err_w, close_fds=True)
    except OSError as e:
        line = f"trainlaunch: cannot execute {cmd[0]!r}: {e.strerror or e}\n".encode()
        write_all(err, line)
        combined.feed(2, line)
        for fd in (out_r, err_r, out, err):
            os.close(fd)
        combined.close()
        return 127 if isinstance(e, FileNotFoundError) else 126
    finally:
        os.close(out_w)
        os.close(err_w)
    proc.returncode = 0  # reaped by pump(), never by Popen
    code = pump([Pump(out_r, out, combined, 1), Pump(err_r, err, combined, 2)], proc.pid)
    combined.close()
    return code


def main(argv: Sequence[str]) -> int:
    """Entry point (see the module docstring)."""
    if len(argv) < 3:
        print(
            "usage: python -m trainlaunch.schedulers.slurm.replica DIR COMMAND [ARGS...]",
            file=sys.stderr,
        )
        return 2
    survive_signals()
    try:
        code = run(argv[1], argv[2:])
    except OSError as e:  # the log files cannot be created (a full disk, a missing dir)
        print(
            f"trainlaunch: cannot write the logs in {argv[1]}: {e.strerror or e}", file=sys.stderr
        )
        code = 1
    # The command has ended: its code is what counts. The interpreter's shutdown resets the
    # no-op handlers, so a SIGTERM then (srun ending the step after another task exited)
    # would end the runner with 143 instead: ignore them for the rest of its life.
    for name in SURVIVED:
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))


__all__ = ["exit_code", "main", "pump", "run", "survive_signals"]
