"""The one hang watchdog every backend runs: trigger, dump, record, then restart or stop.

A backend hands it the app as a :class:`WatchedApp`: how its ranks are found (their progress,
stacks/progress.py), how their stacks are dumped, where the record and the dumps go, and how
the app is restarted or stopped. :meth:`Watchdog.tick`, called about once a second (by the
local supervisor's loop, or by :func:`watch` in a watchdog process of its own, as on Slurm),
fires when no running rank made progress for ``hang_timeout`` seconds: it dumps every rank's
stack into ``hang-<n>.{txt,json}``, records the hang in ``watchdog.json`` (which ``status``
shows), says so in one line on stderr and applies ``on_hang``: ``none`` (report only),
``stop``, or ``restart`` (while the app has a restart left; else stop). A hang fires once: the
next one needs some rank to progress first. Torch-free; stat calls only between hangs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from trainlaunch import store
from trainlaunch.errors import StoreError
from trainlaunch.stacks import ON_HANG
from trainlaunch.values import frozen

if TYPE_CHECKING:  # imported where a hang is handled: the backends' queries import this
    # module (hang_options, status_view) and handle none
    from trainlaunch.stacks import collectives, values
    from trainlaunch.stacks.dump import Target
    from trainlaunch.stacks.progress import RankProgress

WATCHDOG_FILE = "watchdog.json"
NONE, STOP, RESTART = ON_HANG
POLL_S = 1.0  # how often a watchdog process of its own looks (watch)


def hang_options(cfg: Mapping[str, Any]) -> tuple[float | None, str]:
    """(hang_timeout seconds or None when off, on_hang action) from an app's recorded cfg."""
    raw = cfg.get("hang_timeout")
    timeout = float(raw) if isinstance(raw, (int, float)) and raw > 0 else None
    action = str(cfg.get("on_hang") or NONE)
    return timeout, action if action in ON_HANG else NONE


def read_record(record_dir: Path) -> dict[str, Any] | None:
    """The watchdog's record (None when no hang was ever detected, or it is unreadable)."""
    try:
        rec = store.read_json_or_none(record_dir / WATCHDOG_FILE)
    except (StoreError, OSError):
        return None
    return rec if isinstance(rec, dict) else None


def targets(ranks: Sequence[RankProgress], host: str = "") -> list[Target]:
    """What the stack dump needs to know of each rank (host: where a rank names none)."""
    from trainlaunch.stacks.dump import Target

    return [
        Target(
            rank=r.rank,
            pid=r.pid,
            host=r.host or host,
            role=r.role,
            replica_id=r.replica_id,
            exit_code=r.exit_code,
            ended=not r.running,
            recorder=r.recorder,
        )
        for r in ranks
    ]


def status_view(
    ranks: Callable[[], Sequence[RankProgress]],
    cfg: Mapping[str, Any],
    record_dir: Path,
    running: bool,
) -> dict[str, Any]:
    """Status metadata: ``progress`` per rank and ``stall`` (a running app), ``hang`` (the
    watchdog's last record)."""
    from trainlaunch.stacks.progress import progress_rows, stall_message

    meta: dict[str, Any] = {}
    if running:
        timeout, _ = hang_options(cfg)
        rows, now = ranks(), time.time()
        meta["progress"] = progress_rows(rows, now, timeout)
        meta["stall"] = stall_message(rows, timeout, now)
    rec = read_record(record_dir)
    if rec is not None:
        meta["hang"] = rec
    return meta


def _no_report() -> collectives.Report:
    """No recorder view (the ranks' recorders were not asked): the default of Hang."""
    from trainlaunch.stacks import collectives

    return collectives.Report((), ())


@frozen
class Hang:
    """One hang the watchdog detected, and what it did about it."""

    number: int  # 1 for the app's first hang (numbering goes on across restarts)
    at: float  # when the stacks were taken (unix time)
    idle: float  # seconds since the last progress of any rank
    timeout: float
    on_hang: str  # what was asked
    action: str  # what was done: on_hang, or stop when no restart was left
    dump: Path  # hang-<n>.txt: the grouped stacks
    dump_json: Path  # hang-<n>.json: the `stack --json` document
    summary: tuple[str, ...]  # one line per group of ranks
    collectives: collectives.Report = dataclasses.field(default_factory=_no_report)

    @property
    def what(self) -> str:
        """``no output or metrics from any rank for 12m``."""
        from trainlaunch.diagnosis.values import duration
        from trainlaunch.stacks.progress import NO_PROGRESS

        return f"{NO_PROGRESS} for {duration(self.idle)}"

    @property
    def stopped(self) -> bool:
        """Whether the app was stopped (asked for, or no restart left)."""
        return self.action == STOP

    def message(self) -> str:
        """Why a stopped app ended, as its status says."""
        why = "no restart left" if self.action != self.on_hang else f"on_hang={self.action}"
        return f"hung: {self.what}; {self.story()}; stopped ({why}); stacks in {self.dump}"

    def record(self) -> dict[str, Any]:
        """The watchdog.json document (stable keys: docs/hangs.md)."""
        return {
            "hangs": self.number,
            "at": self.at,
            "idle_s": round(self.idle, 1),
            "timeout": self.timeout,
            "on_hang": self.on_hang,
            "action": self.action,
            "dump": str(self.dump),
            "dump_json": str(self.dump_json),
            "summary": list(self.summary),
            "collectives": self.collectives.to_dict(),
        }

    def story(self) -> str:
        """The one line that says where the ranks are: the collective view, else the stacks."""
        lines = self.collectives.lines or self.summary
        return lines[0] if lines else ""


class WatchedApp(Protocol):
    """What a backend tells the watchdog about one app, and how it acts on a hang."""

    @property
    def record_dir(self) -> Path:
        """Where watchdog.json goes (``status`` reads it there)."""

    @property
    def dump_dir(self) -> Path:
        """Where hang-<n>.txt and hang-<n>.json go."""

    def ranks(self) -> list[RankProgress]:
        """Every rank of the app now, running or not, with its progress files."""

    def dump(self, targets: list[Target]) -> list[values.RankStack]:
        """Every target's stack (py-spy, all at once); one RankStack per target."""

    def restarts_left(self) -> bool:
        """Whether the app may be restarted once more (its retry budget)."""

    def restart(self, hang: Hang) -> None:
        """Restart the whole app (a restart that counts against its retries)."""

    def stop(self, hang: Hang) -> None:
        """Stop the app; it ends as hung (hang.message() says why)."""


@dataclasses.dataclass
class _Seen:
    """What the watchdog last saw of one rank (one process of it: rank, pid, start ticks)."""

    anchor: float  # monotonic time of its last progress
    last: float  # its progress files' newest modification time then (wall clock)
    cpu: float | None  # its CPU seconds then, while it has shown no sign of life


class Watchdog:
    """Detects app-wide stalls of one app and applies on_hang.

    Idleness is measured on the monotonic clock: a rank's progress files are compared with
    what the previous look saw, and a change moves that rank's clock to now (less the file's
    age, trusted only up to the time since the previous progress), so a step of the wall clock
    (NTP, a VM resumed) neither fires nor hides a hang. Until its first sign of life (a line
    of output, a metric, a heartbeat) a rank is *starting*: its clock also moves while its CPU
    time grows (``import torch`` on a loaded machine, a dataset loaded before the first line);
    a starting rank that uses no CPU (waiting in the rendezvous) stalls as any other. After the
    first sign of life CPU time does not count: a rank waiting in an NCCL collective spins a core.
    """

    def __init__(self, app: WatchedApp, timeout: float | None, on_hang: str = NONE) -> None:
        self.app, self.timeout = app, timeout
        self.on_hang = on_hang if on_hang in ON_HANG else NONE
        # a watchdog that starts again (a Slurm requeue) numbers on, not over the old dumps
        hangs = (read_record(app.record_dir) or {}).get("hangs")
        self.hangs = hangs if isinstance(hangs, int) and not isinstance(hangs, bool) else 0
        self.seen: dict[tuple[int, int | None, int | None], _Seen] = {}
        self.fired_at: float | None = None  # newest progress (monotonic) when the last one fired

    def tick(self) -> Hang | None:
        """Look once; the hang that fired now, if one did (already acted on)."""
        if self.timeout is None:
            return None
        ranks = self.app.ranks()
        running = [r for r in ranks if r.running]
        if not running:
            return None
        newest = max(self._observe(running))
        idle = time.monotonic() - newest
        if idle < self.timeout or self.fired_at == newest:
            return None
        self.fired_at = newest
        return self.fire(ranks, idle)

    def _observe(self, running: list[RankProgress]) -> list[float]:
        """Each running rank's last progress on the monotonic clock (see the class)."""
        now_m, now_w = time.monotonic(), time.time()
        out, keep = [], {}
        for r in running:
            key = (r.rank, r.pid, r.ticks)
            last = r.last_progress()
            cpu = None if r.shown_life() else cpu_seconds(r)
            s = self.seen.get(key)
            if s is None:  # first look: the files' age is all there is to go by
                s = _Seen(now_m - max(0.0, now_w - last), last, cpu)
            elif last != s.last:  # progress: its age, at most the time since the previous
                s.anchor = now_m - min(max(0.0, now_w - last), now_m - s.anchor)
                s.last = last
            elif cpu is not None and s.cpu is not None and cpu > s.cpu:  # starting, busy
                s.anchor = now_m
            s.cpu = cpu
            keep[key] = s
            out.append(s.anchor)
        self.seen = keep
        return out

    def fire(self, ranks: list[RankProgress], idle: float) -> Hang:
        """Dump the stacks, record the hang, say so, apply on_hang."""
        from trainlaunch.stacks import collectives, values

        assert self.timeout is not None
        self.hangs += 1
        taken = time.time()
        dumped = self.app.dump(targets(ranks))
        groups = values.group(dumped)
        view = collectives.from_stacks(dumped)
        txt = self.app.dump_dir / f"hang-{self.hangs}.txt"
        js = self.app.dump_dir / f"hang-{self.hangs}.json"
        action = self.on_hang
        if action == RESTART and not self.app.restarts_left():
            action = STOP
        hang = Hang(
            self.hangs, taken, idle, self.timeout, self.on_hang, action, txt, js,
            tuple(values.summary_lines(groups)), view,
        )  # fmt: skip
        head = "".join(f"# {ln}\n" for ln in (hang.what, *view.lines, view.unavailable) if ln)
        doc = {**values.document(dumped, taken), "idle_s": round(idle, 1)}
        with contextlib.suppress(OSError, StoreError):  # a full disk must not stop the watchdog
            txt.write_text(f"{head}{values.render_text(groups)}\n", encoding="utf-8")
            store.write_json(js, {**doc, "collectives": view.to_dict()})
        with contextlib.suppress(OSError, StoreError):
            store.write_json(self.app.record_dir / WATCHDOG_FILE, hang.record())
        _say(f"hung: {hang.what}; {hang.story()}; action: {action}; stacks in {txt}")
        if action == STOP:
            self.app.stop(hang)
        elif action == RESTART:
            self.app.restart(hang)
        return hang


def cpu_seconds(rank: RankProgress) -> float | None:
    """The rank's CPU time so far, where this machine can read it (None elsewhere)."""
    from trainlaunch.node import processes
    from trainlaunch.node.usage import usage

    if rank.host not in ("", os.uname().nodename) or not rank.pid:
        return None
    if not processes.same_process_alive(rank.pid, rank.ticks):  # a reused pid is not the rank
        return None
    used = usage(rank.pid)
    return used.cpu_s if used is not None else None


def watch(dog: Watchdog, running: Callable[[], bool], poll_s: float = POLL_S) -> Hang | None:
    """For a watchdog in a process of its own: tick every poll_s while running() holds; the
    hang that stopped or restarted the app (its processes are going), or None once it ended."""
    while running():
        time.sleep(poll_s)
        hang = dog.tick()
        if hang is not None and hang.action != NONE:
            return hang
    return None


def _say(text: str) -> None:
    """One line on stderr (the supervisor's log, the Slurm watchdog's log); best effort."""
    with contextlib.suppress(OSError):
        os.write(2, f"trainlaunch watchdog: {text}\n".encode())


__all__ = [
    "POLL_S",
    "WATCHDOG_FILE",
    "Hang",
    "WatchedApp",
    "Watchdog",
    "cpu_seconds",
    "hang_options",
    "read_record",
    "status_view",
    "targets",
    "watch",
]
