"""What a backend offers of the Scheduler protocol's optional members (declared, never guessed).

Each backend module declares ``CAPABILITIES``; the CLI and its help texts ask for them
(``schedulers.capabilities_of(name)``, ``schedulers.with_capability(...)``) instead of naming a
backend, and a member a backend leaves out raises ``errors.Unsupported``.
"""

from __future__ import annotations

import dataclasses

from trainlaunch.values import frozen


@frozen
class Capabilities:
    """What a backend offers beyond the required members (each backend module declares one)."""

    logs: bool = False  # log_iter: the replicas' output (`trainlaunch logs`)
    stacks: bool = False  # stacks: every rank's stack at once (`trainlaunch stack`)
    requeue: bool = False  # requeue: preempt now, then run again (`stop --requeue`)
    arrays: bool = False  # submit_array_dryrun: many apps as one job, at most K running
    slot_groups: bool = False  # honours an AppDef's specs.SlotGroup: at most K of a group run
    snapshots: bool = False  # the `snapshot` option: the replicas run a copy of the code
    hang_watchdog: bool = False  # the `hang_timeout`/`on_hang` options (docs/hangs.md)

    def names(self) -> list[str]:
        """The capabilities offered, by name."""
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name)]


__all__ = ["Capabilities"]
