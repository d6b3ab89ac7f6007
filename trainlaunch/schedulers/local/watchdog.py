"""The local app as the hang watchdog (stacks/watchdog.py) sees it, through its supervisor.

With the ``hang_timeout`` option set, the supervisor calls the watchdog's ``tick`` once per loop
(about a second). The ranks come from the supervisor's own (in-memory) records, their stacks
from py-spy on this machine; the dumps go next to the app's logs (``logs/hang-<n>.{txt,json}``)
and the record into the app's directory (``watchdog.json``). ``restart`` is an application
restart that counts against max_retries; ``stop`` stops every replica and the app ends FAILED.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trainlaunch.schedulers.local.ranks import app_ranks
from trainlaunch.stacks.dump import Target, dump
from trainlaunch.stacks.progress import RankProgress
from trainlaunch.stacks.values import RankStack
from trainlaunch.stacks.watchdog import Hang, Watchdog, hang_options

if TYPE_CHECKING:
    from trainlaunch.schedulers.local.supervisor import Supervisor


class SupervisedApp:
    """One local app, held by its supervisor (a stacks.watchdog.WatchedApp)."""

    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup

    @property
    def record_dir(self) -> Path:
        """The app's directory: ``status`` reads watchdog.json there."""
        return self.sup.app_dir

    @property
    def dump_dir(self) -> Path:
        """Next to the app's logs."""
        return self.sup.app_dir / "logs"

    def ranks(self) -> list[RankProgress]:
        """The app's ranks from the supervisor's own (in-memory) records."""
        state = {"replicas": [r.record() for r in self.sup.replicas]}
        return app_ranks(self.sup.app_dir, self.sup.request, state)

    def dump(self, targets: list[Target]) -> list[RankStack]:
        """py-spy on every rank of this machine, all at once."""
        return dump(targets)

    def restarts_left(self) -> bool:
        """An application restart is left (num_restarts below the roles' max_retries)."""
        return self.sup.num_restarts < max(self.sup.max_retries.values())

    def restart(self, hang: Hang) -> None:
        """An application restart (as the APPLICATION retry policy does one)."""
        sup = self.sup
        sup.num_restarts += 1
        sup.terminate(sup.replicas, "CANCELLED")
        sup.end_attempt("hung (restarted)")
        sup.restart_all()  # a new attempt in the history

    def stop(self, hang: Hang) -> None:
        """Stop every replica; the app ends FAILED, saying it hung."""
        from trainlaunch.diagnosis.values import STOPPED, Diagnosis

        self.sup.terminate(self.sup.replicas, "CANCELLED")
        self.sup.end_attempt("hung")  # the history's row says so (not the app's `failed`)
        self.sup.state, self.sup.msg = "FAILED", hang.message()
        line = f"stopped by the hang watchdog: {hang.what}; {hang.story()}"
        self.sup.failure = Diagnosis(STOPPED, line, (f"stacks in {hang.dump}",))


def watchdog(sup: Supervisor) -> Watchdog:
    """The hang watchdog of a supervised app (its timeout None: hang_timeout is off)."""
    timeout, on_hang = hang_options(sup.request.get("cfg") or {})
    return Watchdog(SupervisedApp(sup), timeout, on_hang)


__all__ = ["SupervisedApp", "watchdog"]
