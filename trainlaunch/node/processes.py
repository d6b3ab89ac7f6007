"""Process helpers shared by the local supervisor, the local backend and the node agent.

Torch-free and small: signalling a process group that may be gone, a rendezvous port no other
job can take, the private umask of trainlaunch's own processes, and the one liveness rule: a
process is alive when ``/proc`` shows it and it is not a zombie (:func:`alive`); a recorded
one is still alive only when its start time and boot match too (:func:`same_process_alive`),
so that a reused pid is never taken for the one recorded. A process group is alive while a
signal reaches any member (:func:`group_alive`). A launcher process whose work is done
ends at once (:func:`exit_at_once`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import NoReturn

POLL_S = 0.02  # how often stop_with_grace looks again when the caller has nothing to wait on


def killpg(pgid: int, sig: int) -> None:
    """Send sig to a process group; one that is gone (or not ours any more) is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def reserve_port(host: str = "127.0.0.1") -> int:
    """A free port, parked in TIME_WAIT so no plain bind (another job's) takes it for ~60 s.

    Rank 0's TCPStore binds it with SO_REUSEADDR, which TIME_WAIT allows; meanwhile the
    kernel does not hand it out for ``bind(0)``, so concurrent jobs never collide.
    """
    # _socket, not socket: socket.py builds its enums at import (~3 ms of every `run`); a
    # plain IPv4 TCP socket needs none of it
    import _socket

    srv = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    cli = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        srv.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        srv.bind((host, 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        cli.connect((host, port))
        conn, _ = srv._accept()  # type: ignore[attr-defined]  # (fd, address): no typeshed stub
        os.close(conn)  # the server side closes first: it is the one left in TIME_WAIT
    finally:
        cli.close()
        srv.close()
    return int(port)


def keep_files_private() -> int:
    """Make what this process creates private (umask 077); return the umask it had.

    For the supervisor and the node agent, whose records and logs are the user's alone; the
    processes they start get the returned umask back (``subprocess.Popen(umask=...)``).
    """
    return os.umask(0o077)


def current_umask() -> int:
    """This process's umask, unchanged (reading it means setting it: it is put back at once)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


# --- process identity (pid reuse safe) ----------------------------------------------------------


def boot_id() -> str:
    """This boot's id: a record written before a reboot has another one."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def stat_fields(pid: int) -> list[bytes] | None:
    """/proc/PID/stat's fields from the state on (field 3; None if there is no such process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # the command name may contain spaces and ')': fields start after the last ')'
    return data[data.rfind(b")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """The process start time in clock ticks since boot (None if it does not exist)."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    try:
        if fields[0] == b"Z":  # a zombie has exited already
            return None
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def alive(pid: int | None) -> bool:
    """pid is a process that exists and has not exited (a zombie has: it waits to be reaped)."""
    return pid is not None and pid > 0 and start_ticks(pid) is not None


def group_alive(pgid: int) -> bool:
    """A signal still reaches some member of process group pgid (someone else's counts too)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def same_process_alive(pid: int | None, ticks: int | None, boot: str | None = None) -> bool:
    """True if pid is alive and is still the process recorded (same start time and boot)."""
    if not pid or pid <= 0:
        return False
    if boot and boot != boot_id():
        return False
    now = start_ticks(pid)
    if now is None or ticks is None:  # no recorded start time: the pid may be someone else's
        return False
    return now == ticks


# --- stopping (SIGTERM, grace, SIGKILL, wait) -----------------------------------------------------


INTERRUPT_TERM_S = 5.0  # an interrupt's stop: SIGINT, the grace period, SIGTERM, this, SIGKILL


def exit_at_once(code: int) -> NoReturn:
    """End this process with code, skipping the interpreter's teardown when it has nothing
    left to run: stdout and stderr are flushed here, and with no other thread and no atexit
    callback, ``os._exit``. The teardown frees every module and object one by one (5-12 ms
    of the CLI's, the supervisor's and the node agent's exit), and those three exits are in
    series between a rank's end and ``run --wait``'s (bench/results/2026-12-07-launch)."""
    import atexit

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe, a closed stream
            stream.flush()
    threading = sys.modules.get("threading")
    if (threading is not None and threading.active_count() > 1) or atexit._ncallbacks():
        sys.exit(code)  # the normal exit joins the threads and runs the callbacks
    os._exit(code)


def interrupt_term_wait(grace: float) -> float:
    """How long an interrupt's stop waits after its SIGTERM before SIGKILL (torchrun's
    SIGINT grace is the whole period; the SIGTERM step is short, never the longer one)."""
    return min(grace, INTERRUPT_TERM_S)


def _pause(seconds: float) -> None:
    time.sleep(min(seconds, POLL_S))


def _never() -> bool:
    return False


def stop_with_grace(
    targets: Sequence[int],
    grace: float,
    *,
    sig: int = signal.SIGTERM,
    send: Callable[[int, int], None] = killpg,
    alive: Callable[[int], bool] = group_alive,
    wait: Callable[[float], None] = _pause,
    cut_short: Callable[[], bool] = _never,
    kill_wait: float = 0.0,
    kill_sig: int = signal.SIGKILL,
) -> list[int]:
    """Send sig to every target, give them grace seconds to end, send the rest kill_sig
    (SIGKILL; SIGTERM for the middle step of an interrupt's SIGINT, SIGTERM, SIGKILL) and wait
    up to kill_wait seconds for those; return the targets still alive.

    Targets are process groups by default (each replica or worker leads its own), polled.
    A parent passes ``alive`` and ``wait`` that reap its children and keep reading their pipes
    meanwhile (a child blocked on a full pipe never ends); ``wait(seconds)`` returns early when
    something happened. ``cut_short`` ends the grace period early (a second stop signal).
    """
    for t in targets:
        send(t, sig)
    left = _wait_for(targets, grace, alive, wait, cut_short)
    for t in left:
        send(t, kill_sig)
    return _wait_for(left, kill_wait, alive, wait, _never)


def _wait_for(
    targets: Sequence[int],
    seconds: float,
    alive: Callable[[int], bool],
    wait: Callable[[float], None],
    cut_short: Callable[[], bool],
) -> list[int]:
    """The targets still alive after up to seconds (or once cut_short says so)."""
    deadline = time.monotonic() + seconds
    left = [t for t in targets if alive(t)]
    while left and not cut_short():
        rest = deadline - time.monotonic()
        if rest <= 0:
            break
        wait(rest)
        left = [t for t in left if alive(t)]
    return left
