"""The local supervisor's hang watchdog, and what ``status`` reads of it.

With the ``hang_timeout`` option set, the supervisor calls :meth:`Watchdog.tick` once per loop
(about a second). Progress of a rank is the newest modification time of its output files,
metrics file and heartbeat file (stat calls only: cheap, torch-free). When no running rank made
progress for ``hang_timeout`` seconds, the watchdog dumps every rank's stack with py-spy into
``logs/hang-<n>.{txt,json}``, records the hang in ``watchdog.json`` and applies ``on_hang``:
``none`` (report only), ``stop`` (the app ends FAILED) or ``restart`` (an application restart
that counts against max_retries; with none left, the app is stopped).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainlaunch import stacks, store
from trainlaunch.errors import StoreError
from trainlaunch.schedulers.local.ranks import LocalRank, app_ranks
from trainlaunch.schedulers.progress import duration, stall_message
from trainlaunch.stackdump import Target, dump

if TYPE_CHECKING:
    from trainlaunch.schedulers.local.supervisor import Supervisor

WATCHDOG_FILE = "watchdog.json"
ON_HANG = ("none", "stop", "restart")


def hang_options(cfg: Mapping[str, Any]) -> tuple[float | None, str]:
    """(hang_timeout seconds or None when off, on_hang action) from an app's recorded cfg."""
    raw = cfg.get("hang_timeout")
    timeout = float(raw) if isinstance(raw, (int, float)) and raw > 0 else None
    action = str(cfg.get("on_hang") or "none")
    return timeout, action if action in ON_HANG else "none"


def targets(ranks: Sequence[LocalRank]) -> list[Target]:
    """What stackdump needs to know of each rank."""
    import socket  # here: the CLI imports this module to read records, not to name hosts

    host = socket.gethostname()
    return [
        Target(
            rank=r.rank,
            pid=r.pid,
            host=host,
            role=r.role,
            replica_id=r.replica_id,
            exit_code=r.exit_code,
            ended=not r.running,
        )
        for r in ranks
    ]


def read_record(app_dir: Path) -> dict[str, Any] | None:
    """The watchdog's record (None when no hang was ever detected)."""
    try:
        rec = store.read_json_or_none(app_dir / WATCHDOG_FILE)
    except StoreError:
        return None
    return rec if isinstance(rec, dict) else None


class Watchdog:
    """Detects app-wide stalls for one supervisor and applies on_hang."""

    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup
        self.timeout, self.action = hang_options(sup.request.get("cfg") or {})
        self.hangs = 0
        self.fired_at: float | None = None  # newest progress seen when the last hang fired
        self.message = ""

    def ranks(self) -> list[LocalRank]:
        """The app's ranks from the supervisor's own (in-memory) records."""
        state = {"replicas": [r.record() for r in self.sup.replicas]}
        return app_ranks(self.sup.app_dir, self.sup.request, state)

    def tick(self) -> bool:
        """Check once; True when the app must be stopped (self.message says why)."""
        if self.timeout is None:
            return False
        now = time.time()
        ranks = self.ranks()
        running = [r for r in ranks if r.running]
        if not running:
            return False
        newest = max(r.last_progress() for r in running)
        if now - newest < self.timeout or self.fired_at == newest:
            return False
        self.fired_at = newest
        self.hangs += 1
        return self.fire(ranks, now - newest)

    def fire(self, ranks: list[LocalRank], idle: float) -> bool:
        """Dump the stacks, record the hang, apply on_hang; True to stop the app."""
        taken = time.time()
        dumped = dump(targets(ranks))
        groups = stacks.group(dumped)
        logs = self.sup.app_dir / "logs"
        txt, js = logs / f"hang-{self.hangs}.txt", logs / f"hang-{self.hangs}.json"
        what = f"no output or metrics from any rank for {duration(idle)}"
        try:
            txt.write_text(f"# {what}\n{stacks.render_text(groups)}\n", encoding="utf-8")
            store.write_json(js, {**stacks.document(dumped, taken), "idle_s": round(idle, 1)})
        except (OSError, StoreError):
            pass  # a full disk must not keep the watchdog from acting
        action = self.action
        if action == "restart" and self.sup.num_restarts >= max(self.sup.max_retries.values()):
            action = "stop"  # no restart left
        rec = {
            "hangs": self.hangs,
            "at": taken,
            "idle_s": round(idle, 1),
            "timeout": self.timeout,
            "on_hang": self.action,
            "action": action,
            "dump": str(txt),
            "dump_json": str(js),
            "summary": stacks.summary_lines(groups),
        }
        with contextlib.suppress(OSError, StoreError):
            store.write_json(self.sup.app_dir / WATCHDOG_FILE, rec)
        why = "no restart left" if action != self.action else f"on_hang={action}"
        self.message = f"hung: {what}; stopped ({why}); stacks in {txt}"
        if action == "stop":
            return True
        if action == "restart":
            self.restart()
        return False

    def restart(self) -> None:
        """An application restart (as the APPLICATION retry policy does one)."""
        sup = self.sup
        sup.num_restarts += 1
        sup.terminate(sup.replicas, "CANCELLED")
        sup.end_attempt("hung (restarted)")
        sup.restart_all()  # a new attempt in the history


__all__ = [
    "ON_HANG",
    "WATCHDOG_FILE",
    "Watchdog",
    "duration",
    "hang_options",
    "read_record",
    "stall_message",
    "targets",
]
