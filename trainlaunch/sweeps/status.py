"""What a sweep is now: every point with its app's description (values; the Runner fills them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from trainlaunch.errors import AppNotFound
from trainlaunch.handles import SweepHandle
from trainlaunch.schedulers.api import DescribeAppResponse
from trainlaunch.specs import AppState, AppStatus
from trainlaunch.sweeps import grammar
from trainlaunch.sweeps.record import recorded_handle
from trainlaunch.values import frozen


@frozen
class PointDescription:
    """One point of a sweep: its values, its app's handle and what its backend knows of it."""

    index: int
    params: Mapping[str, str]
    seed: int | None
    handle: str | None  # None: never submitted (a submission failed half-way)
    resp: DescribeAppResponse | None = None  # None: unsubmitted, or its app no longer exists
    missing: str = ""  # why a submitted point has no description (its app no longer exists)

    @property
    def status(self) -> AppStatus:
        """The app's status; UNSUBMITTED, or an ended UNKNOWN for an app that is gone."""
        if self.resp is not None:
            return self.resp.status
        if self.handle is None:
            return AppStatus(AppState.UNSUBMITTED)
        return AppStatus(AppState.UNKNOWN, msg=self.missing, ended=True)

    @property
    def is_terminal(self) -> bool:
        """Nothing more will happen to this point (an unsubmitted one included)."""
        return self.handle is None or self.status.is_terminal

    @property
    def label(self) -> str:
        """``lr=0.1 seed=1``: how the point is shown."""
        return grammar.point_label(grammar.SweepPoint(self.index, self.params, self.seed))

    def to_dict(self) -> dict[str, Any]:
        """The point's row (status --json): index, params, seed, handle, state, msg."""
        st = self.status
        return {
            "index": self.index,
            "params": dict(self.params),
            "seed": self.seed,
            "handle": self.handle,
            "state": st.state.name,
            "msg": st.msg,
        }


@frozen
class SweepDescription:
    """A sweep: its handle as recorded, what it runs, and every point in order."""

    handle: SweepHandle
    component: str
    args: tuple[str, ...]
    max_parallel: int | None
    created: float | None
    points: tuple[PointDescription, ...]

    @property
    def is_terminal(self) -> bool:
        """Every point has ended (or was never submitted)."""
        return all(p.is_terminal for p in self.points)

    def statuses(self) -> list[AppStatus]:
        """Every point's status, in order."""
        return [p.status for p in self.points]

    def handles(self) -> list[str]:
        """The handles of the submitted points, in order."""
        return [p.handle for p in self.points if p.handle]


Describe = Callable[[str], DescribeAppResponse]


def describe(
    handle: SweepHandle,
    record: Mapping[str, Any],
    describe_app: Describe,
    known: Mapping[str, DescribeAppResponse] | None = None,
) -> SweepDescription:
    """The sweep now: each submitted point described (a terminal description in known is kept:
    an ended app does not change, and a poll over many need not ask again)."""
    known = known or {}
    points = []
    for row in record["points"]:
        h = row.get("handle") or None
        resp, missing = known.get(h or ""), ""
        if h and resp is None:
            try:
                resp = describe_app(h)
            except AppNotFound as e:  # the app is gone (its store was cleaned): over, unknown
                missing = str(e)
        params = {str(k): str(v) for k, v in (row.get("params") or {}).items()}
        points.append(
            PointDescription(int(row["index"]), params, row.get("seed"), h, resp, missing)
        )
    max_parallel = record.get("max_parallel")
    return SweepDescription(
        recorded_handle(handle, record),
        str(record.get("component") or ""),
        tuple(str(a) for a in record.get("args") or ()),
        int(max_parallel) if max_parallel is not None else None,
        record.get("created"),
        tuple(points),
    )


__all__ = ["PointDescription", "SweepDescription", "describe"]
