"""The CLI's signal handler: SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt (exit 130).

Importable before anything else (signal only: no click, no typing): the ``trainlaunch``
command installs it as its first lines (trainlaunch/__main__.py), before the 0.1-0.2 s of
imports in which a signal used to end the CLI with a traceback, exit 1 or as killed by it
(issue 23 #13); cli/boundary.py's raise_on_sigterm installs the same handler.

A KeyboardInterrupt raised while a module is being imported is not always one afterwards: in
a weakref callback of importlib's module locks Python prints "Exception ignored" and drops it
(the command then went on and exited 0), and in a class body's ``__set_name__`` Python 3.11
turns it into RuntimeError (exit 1, a traceback). So a signal that lands inside the import
machinery is held and passed on, to whatever handles that signal then, as soon as the import
is over (a 1 ms SIGALRM timer looks again). Likewise from install() until the command's entry
point is inside its ``try`` (arm()): a KeyboardInterrupt there would have nobody to catch it.
"""

from __future__ import annotations

import signal as _signal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType

NAMES: dict[int, str] = {
    _signal.SIGINT: "SIGINT",
    _signal.SIGTERM: "SIGTERM",
    _signal.SIGHUP: "SIGHUP",
}
RETRY_S = 0.001  # how soon a held signal is looked at again
_held: list[int] = []
_armed = [True]  # False from install() to arm(): signals are held, not raised


def install() -> None:
    """Make the CLI's signals raise KeyboardInterrupt; one inherited as ignored stays so
    (`nohup`, `cmd &`), except SIGTERM (cli/boundary.py: raise_on_sigterm's rule)."""
    _armed[0] = False
    for sig in NAMES:
        if sig == _signal.SIGTERM or _signal.getsignal(sig) != _signal.SIG_IGN:
            _signal.signal(sig, interrupt)


def arm() -> None:
    """From here signals raise (called inside the entry point's ``try``); one that came since
    install() is raised now."""
    _armed[0] = True
    deliver_held()


def deliver_held() -> None:
    """Pass a held signal on now (the command's last moment inside the boundary's ``try``: a
    signal held by its last import must not wait for a timer that comes too late)."""
    if _held:
        _pass_on(_signal.SIGALRM, None)


def interrupt(signum: int, frame: FrameType | None) -> None:
    """The handler: KeyboardInterrupt now, or once the import under way is over."""
    if not _armed[0]:
        if not _held:
            _held.append(signum)
        return
    if _importing(frame):
        _hold(signum)
        return
    raise KeyboardInterrupt(NAMES.get(signum, str(signum)))


def by_ctrl_c(e: KeyboardInterrupt) -> bool:
    """Whether the interrupt came from SIGINT (Ctrl-C), not SIGTERM or SIGHUP: the stop it
    asks for reaches the ranks as SIGINT, as torchrun passes Ctrl-C on (issue 22 #23)."""
    return not e.args or e.args[0] == NAMES[_signal.SIGINT]  # Python's own handler: no args


def finish() -> None:
    """The command has ended: no held signal is passed on, and signals wait (blocked, never
    delivered) until the process is gone, so the interpreter's exit, which puts the default
    handlers back, is not killed halfway (-15, -2) and the command's exit code stands."""
    _held.clear()
    _signal.setitimer(_signal.ITIMER_REAL, 0)
    _signal.pthread_sigmask(_signal.SIG_BLOCK, [*NAMES, _signal.SIGALRM])


def _hold(signum: int) -> None:
    if not _held:
        _held.append(signum)
    _signal.signal(_signal.SIGALRM, _pass_on)
    _signal.setitimer(_signal.ITIMER_REAL, RETRY_S)


def _pass_on(_alarm: int, frame: FrameType | None) -> None:
    """SIGALRM: hand the held signal to its handler of now, unless still importing."""
    if not _held:
        return
    if _importing(frame):
        _signal.setitimer(_signal.ITIMER_REAL, RETRY_S)
        return
    signum = _held.pop()
    handler = _signal.getsignal(signum)
    if callable(handler):  # ours, or cli/boundary.py's interrupts_held holding it
        handler(signum, frame)
    elif handler != _signal.SIG_IGN:
        _signal.raise_signal(signum)


def _importing(frame: FrameType | None) -> bool:
    """Whether frame runs inside the import machinery (a module's body included)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False
