"""The doctor's value: one line of its table (a check, its status, what it found, the fix)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from trainlaunch.values import frozen


class Status(str, enum.Enum):
    """How one check came out."""

    OK = "ok"
    WARN = "warn"  # works, but something will bite (a small /dev/shm, no py-spy)
    FAIL = "fail"  # a job cannot run as things are
    SKIP = "skip"  # not configured here, or not checkable (no GPU is ok, not skip)


@frozen
class Check:
    """One line of the doctor's table."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (stable keys)."""
        return {
            "name": self.name,
            "status": self.status.value,
            "detail": self.detail,
            "fix": self.fix,
        }


def ok(name: str, detail: str) -> Check:
    """A check that passed."""
    return Check(name, Status.OK, detail)


def warn(name: str, detail: str, fix: str) -> Check:
    """A check that passed with a caveat, and what to do about it."""
    return Check(name, Status.WARN, detail, fix)


def fail(name: str, detail: str, fix: str) -> Check:
    """A check that failed, and what to do about it."""
    return Check(name, Status.FAIL, detail, fix)


def skip(name: str, detail: str) -> Check:
    """A check that does not apply here."""
    return Check(name, Status.SKIP, detail)


def counts(checks: Sequence[Check]) -> dict[str, int]:
    """How many checks ended in each status."""
    return {s.value: sum(1 for c in checks if c.status == s) for s in Status}
