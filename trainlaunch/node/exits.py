"""How a process ended, in the two conventions trainlaunch meets, and the signal's name.

A *return code* is Popen's (and ``os.waitstatus_to_exitcode``'s): the exit code, or ``-N``
when signal N killed the process. An *exit code* is what a shell, ``sacct`` and every record
trainlaunch writes show: the exit code, or ``128+N`` for signal N. The node agent keeps its
workers' return codes; everything it and the other node-side programs record is an exit code.
"""

from __future__ import annotations

import signal
from typing import overload


@overload
def shell_code(code: int) -> int: ...


@overload
def shell_code(code: object) -> int | None: ...


def shell_code(code: object) -> int | None:
    """The exit code for a return code (``-9`` -> ``137``); None for what is not an int."""
    if not isinstance(code, int) or isinstance(code, bool):
        return None  # a record's damaged or missing value
    return 128 - code if code < 0 else code


def signal_name(code: int | None, *, returncode: bool = False) -> str | None:
    """The name of the signal that ended a process (``SIGKILL``), None for a normal exit.

    ``code`` is an exit code (``137``: killed by signal 9) unless ``returncode`` says it is a
    return code, whose positive values are the process's own exit (a worker's ``exit(137)``);
    a negative code is a return code either way. An exit code above 128 that is no signal's
    (``exit(200)``) is a normal exit; a return code's unknown signal is named ``signal N``.
    """
    if code is None:
        return None
    if code < 0:
        return _name(-code) or f"signal {-code}"
    if returncode or code <= 128:
        return None
    return _name(code - 128)


def _name(signum: int) -> str | None:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return None


__all__ = ["shell_code", "signal_name"]
