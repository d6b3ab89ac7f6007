"""The exception tree; every error knows its exit code and an optional hint.

::

    TrainlaunchError            base; .hint, .exit_code
      UsageError           2    bad flag, handle, option, config
        ComponentError     2    not found / not loadable / bad args / not an AppDef
      SchedulerError       3    a backend command or API call failed
        SchedulerUnavailable 3  the backend cannot be used here (not installed, unreachable)
        Unsupported        3    the backend does not offer what was asked (its Capabilities)
      AppNotFound          4    unknown handle
      AppFailed            1    an app ended FAILED, CANCELLED or UNKNOWN while waiting (ExitCode;
                                9 when its preflight refused it)
      ChecksFailed         1    `doctor`: a check failed (or warned, with --strict)
      StoreError           5    the app store cannot be read or written
      WaitTimeout          7    waiting for an app ran past its --timeout

The exit-code table lives in :class:`ExitCode`; ``cli/boundary.py`` is the only place that
turns these errors into process exit codes.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Every exit code the CLI can return (documented in docs/cli.md)."""

    OK = 0
    APP_FAILED = 1  # wait/run --wait: the app ended FAILED (--app-exit-code: the rank's code)
    USAGE = 2  # bad flag, handle, option, config, component or argument
    SCHEDULER = 3  # a scheduler command or API call failed, the backend is unavailable here,
    # or it does not offer what was asked (logs, stack, stop --requeue on a backend without them)
    NOT_FOUND = 4  # no app with that handle
    STORE = 5  # the app store cannot be read or written (permissions, disk full, corrupt)
    CANCELLED = 6  # wait/run --wait: the app ended CANCELLED
    TIMEOUT = 7  # wait --timeout elapsed before the app ended
    UNKNOWN_RESULT = 8  # wait/run --wait: the app ended, but how is not known (see its msg)
    PREFLIGHT = 9  # wait/run --wait: the app's preflight refused it; no rank started
    INTERNAL = 70  # a bug in trainlaunch: rerun with --debug and report it
    INTERRUPTED = 130  # Ctrl-C (SIGINT) or SIGTERM to the CLI


class TrainlaunchError(Exception):
    """Base of every error trainlaunch raises on purpose."""

    exit_code: int = int(ExitCode.INTERNAL)

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(TrainlaunchError):
    """Bad command-line input, handle, option or configuration."""

    exit_code = ExitCode.USAGE


class ComponentError(UsageError):
    """A component could not be found, loaded, called, or did not return an AppDef."""


class SchedulerError(TrainlaunchError):
    """A scheduler backend command or API call failed."""

    exit_code = ExitCode.SCHEDULER


class SchedulerUnavailable(SchedulerError):
    """The backend cannot be used on this machine (missing tool, extra or cluster)."""


class Unsupported(SchedulerError):
    """The backend does not offer this (an optional member its Capabilities leave out)."""


class AppNotFound(TrainlaunchError):
    """No app exists for the given handle."""

    exit_code = ExitCode.NOT_FOUND


class StoreError(TrainlaunchError):
    """The app store could not be read or written."""

    exit_code = ExitCode.STORE
    errno: int | None = None  # the OS error behind it, when there is one (ENOSPC, EROFS, ...)


class WaitTimeout(TrainlaunchError):
    """Waiting for an app ran past its timeout."""

    exit_code = ExitCode.TIMEOUT


class AppFailed(TrainlaunchError):
    """An app that was waited for ended in a non-successful state."""

    exit_code: int = int(ExitCode.APP_FAILED)

    def __init__(self, message: str, exit_code: int = ExitCode.APP_FAILED, hint: str | None = None):
        super().__init__(message, hint)
        self.exit_code = exit_code


class ChecksFailed(TrainlaunchError):
    """``trainlaunch doctor`` found a failing check (or, with --strict, a warning)."""

    exit_code = ExitCode.APP_FAILED  # 1: "something is wrong here", as for a failed app
