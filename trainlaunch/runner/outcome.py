"""How waiting ended, for one app and for many (a sweep's points): one rule, one exit code.

The first app in the first of these states decides, in this order:

* FAILED, or never submitted (UNSUBMITTED): exit 1 (9 when its preflight refused it: its
  replicas exited 78, docs/preflight.md), or with ``app_exit_code`` the exit code of the
  failing replica;
* UNKNOWN (ended, but how is not known; or its app no longer exists): exit 8;
* CANCELLED: exit 6;

and when every app SUCCEEDED: exit 0. One app is the case of many with one.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainlaunch.errors import ExitCode
from trainlaunch.settings import PREFLIGHT_EXIT_CODE
from trainlaunch.specs import AppState, AppStatus
from trainlaunch.values import frozen

# the states that decide, strongest first, and the exit code each gives
_RULE: tuple[tuple[frozenset[AppState], AppState, ExitCode], ...] = (
    (frozenset({AppState.FAILED, AppState.UNSUBMITTED}), AppState.FAILED, ExitCode.APP_FAILED),
    (frozenset({AppState.UNKNOWN}), AppState.UNKNOWN, ExitCode.UNKNOWN_RESULT),
    (frozenset({AppState.CANCELLED}), AppState.CANCELLED, ExitCode.CANCELLED),
)


@frozen
class Outcome:
    """How waiting ended: the deciding state, the apps in it and the exit code."""

    state: AppState  # SUCCEEDED, FAILED, UNKNOWN or CANCELLED
    exit_code: int
    apps: tuple[int, ...] = ()  # indexes of the apps in that state (first: the one to show)

    @property
    def first(self) -> int | None:
        """The app that decided (None: all succeeded)."""
        return self.apps[0] if self.apps else None


def outcome(statuses: Sequence[AppStatus], app_exit_code: bool = False) -> Outcome:
    """The outcome of ended apps (see the module docstring)."""
    for states, state, code in _RULE:
        apps = tuple(i for i, st in enumerate(statuses) if st.state in states)
        if not apps:
            continue
        exit_code = int(code)
        if state == AppState.FAILED and statuses[apps[0]].exit_code == PREFLIGHT_EXIT_CODE:
            exit_code = int(ExitCode.PREFLIGHT)  # its node agents refused it: no rank started
        if state == AppState.FAILED and app_exit_code:
            failing = statuses[apps[0]].exit_code  # the first failing app's replica's code
            exit_code = failing or exit_code
        return Outcome(state, exit_code, apps)
    return Outcome(AppState.SUCCEEDED, int(ExitCode.OK))


def combined(statuses: Sequence[AppStatus]) -> AppStatus:
    """One status for many apps: the outcome's state once all ended, else how far they are."""
    ended = [st.is_terminal or st.state == AppState.UNSUBMITTED for st in statuses]
    counts: dict[str, int] = {}
    for st in statuses:
        counts[st.state.name] = counts.get(st.state.name, 0) + 1
    msg = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    if all(ended):
        result = outcome(statuses)
        code = statuses[result.first].exit_code if result.first is not None else 0
        state = result.state
        return AppStatus(state, msg=msg, exit_code=code, ended=state == AppState.UNKNOWN)
    live = {st.state for st, done in zip(statuses, ended, strict=True) if not done}
    for state in (AppState.RUNNING, AppState.PENDING, AppState.SUBMITTED):
        if state in live:
            return AppStatus(state, msg=msg)
    return AppStatus(AppState.UNKNOWN, msg=msg)


__all__ = ["Outcome", "combined", "outcome"]
