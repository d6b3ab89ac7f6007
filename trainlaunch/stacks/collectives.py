"""Which collective a hung job waits in, and which ranks never entered it (pure).

Each rank's Flight Recorder dump (stacks/recorder.py) says, per process group, the sequence
number of the last collective it enqueued and completed and the entries still in flight. A
hang reads as: the ranks whose oldest in-flight collective is the same wait in it; the ranks
that never enqueued it are the ones to look at, with where their stacks are::

    ranks 0,2-3 wait in all_reduce #40 (pg 0, 4 KiB); rank 1 last completed #39 and is at train.py:41
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from trainlaunch.stacks.values import ERROR, EXITED, RankStack, rank_list
from trainlaunch.values import frozen

DTYPE_BYTES = {
    "Bool": 1, "Byte": 1, "Char": 1, "Short": 2, "Int": 4, "Long": 8, "Half": 2, "Float": 4,
    "Double": 8, "BFloat16": 2, "ComplexHalf": 4, "ComplexFloat": 8, "ComplexDouble": 16,
    "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1,
    "UInt16": 2, "UInt32": 4, "UInt64": 8,
}  # fmt: skip


@frozen
class Collective:
    """One collective as a rank's recorder saw it."""

    pg: str
    seq: int
    op: str  # all_reduce, barrier, ...
    nbytes: int | None  # its inputs' size (None: a dtype this table does not know)
    p2p: bool = False

    def text(self, pg_label: str) -> str:
        """``all_reduce #40 (pg 0, 4 KiB)``."""
        size = f", {human_bytes(self.nbytes)}" if self.nbytes else ""
        return f"{self.op} #{self.seq} ({pg_label}{size})"


@frozen
class GroupState:
    """One rank in one process group: what it enqueued, completed and waits in."""

    last_enqueued: int
    last_completed: int
    waiting: Collective | None  # the oldest collective it entered and has not completed


def rank_states(dump: Mapping[str, Any]) -> dict[str, GroupState]:
    """Per process group id, this rank's state (from one recorder dump)."""
    inflight: dict[str, Collective] = {}
    for e in dump.get("entries") or []:
        if not isinstance(e, Mapping) or e.get("retired"):
            continue
        c = _collective(e)
        if c is not None and (c.pg not in inflight or c.seq < inflight[c.pg].seq):
            inflight[c.pg] = c
    out = {}
    for pg, st in (dump.get("pg_status") or {}).items():
        if not isinstance(st, Mapping):
            continue
        done = _int(st.get("last_completed_collective"))
        queued = _int(st.get("last_enqueued_collective"))
        waiting = inflight.get(str(pg))
        if waiting is not None and waiting.seq <= done:
            waiting = None  # torch saw it complete: the entry was not retired yet
        out[str(pg)] = GroupState(queued, done, waiting)
    return out


@frozen
class Report:
    """The collective view of a hang: one line per process group something waits in."""

    lines: tuple[str, ...]
    groups: tuple[dict[str, Any], ...]  # JSON: per pg, who waits in what, who is behind
    unavailable: str = ""  # why there is no view (then the stacks tell)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (stable keys: docs/hangs.md)."""
        return {
            "lines": list(self.lines),
            "groups": list(self.groups),
            "unavailable": self.unavailable,
        }


def report(
    dumps: Mapping[int, Mapping[str, Any] | None],
    stacks: Mapping[int, RankStack],
    errors: Mapping[int, str] | None = None,
) -> Report:
    """The hang's collective view from every rank's dump (None: that rank has none)."""
    states = {r: rank_states(d) for r, d in dumps.items() if d}
    if not states:
        why = next(iter((errors or {}).values()), "") or "no rank answered"
        return Report((), (), f"flight recorder unavailable ({why}): showing stacks")
    labels = _pg_labels(dumps)
    lines, groups = [], []
    for pg in sorted({pg for s in states.values() for pg in s}, key=_pg_order):
        line, doc = _pg_line(pg, labels.get(pg, f"pg {pg}"), states, stacks)
        if line:
            lines.append(line)
            groups.append(doc)
    if not lines:
        done = {s[pg].last_completed for s in states.values() for pg in s}
        lines.append(
            f"no rank waits in a collective (the last completed: #{max(done) if done else '?'})"
            "; the stacks show where they are"
        )
    missing = sorted(set(dumps) - set(states))
    if missing:
        why = (errors or {}).get(missing[0], "")
        lines.append(f"{_who(missing)}: no flight recorder dump" + (f" ({why})" if why else ""))
    return Report(tuple(lines), tuple(groups))


def from_stacks(stacks: Sequence[RankStack]) -> Report:
    """The report of one dump (``stack``, a hang): each live rank's recorder dump and stack."""
    live = [s for s in stacks if s.state != EXITED]
    if live and not any(s.recorder is not None or s.recorder_error for s in live):
        failed = [s for s in live if s.state == ERROR]
        why = failed[0].error if len(failed) == len(live) else OFF  # no rank was reached
        return Report((), (), f"flight recorder unavailable ({why}): showing stacks")
    dumps = {s.rank: s.recorder for s in live}
    errors = {s.rank: s.recorder_error for s in live if s.recorder_error}
    return report(dumps, {s.rank: s for s in stacks}, errors)


OFF = "off for this app: --hang-timeout turns it on"


def _pg_line(
    pg: str,
    label: str,
    states: Mapping[int, Mapping[str, GroupState]],
    stacks: Mapping[int, RankStack],
) -> tuple[str, dict[str, Any]]:
    members = {r: s[pg] for r, s in states.items() if pg in s}
    by_coll: dict[Collective, list[int]] = {}
    for r, st in members.items():
        if st.waiting is not None:
            by_coll.setdefault(st.waiting, []).append(r)
    if not by_coll:
        return "", {}
    order = sorted(by_coll, key=lambda c: (-len(by_coll[c]), c.seq))
    parts = []
    for c in order:
        verb = "waits" if len(by_coll[c]) == 1 else "wait"
        parts.append(f"{_who(by_coll[c])} {verb} in {c.text(label)}")
    head = order[0]
    behind = sorted(
        r for r, st in members.items() if st.waiting is None or st.waiting.seq < head.seq
    )
    behind = [r for r in behind if r not in by_coll.get(head, [])]
    rows = []
    for r in behind:
        st = members[r]
        if st.waiting is not None:
            continue  # already named above, waiting in an earlier collective
        where, at = _where(stacks.get(r))
        parts.append(f"{_who([r])} last completed #{st.last_completed}{where}")
        rows.append({"rank": r, "last_completed": st.last_completed, "at": at})
    if len(order) == 1 and not behind:
        parts.append("every rank entered it")
    seqs = {c.seq for c in order}
    if len(order) > 1 and len(seqs) == 1:
        parts.append("the ranks do not call the same collective")
    doc = {
        "pg": pg,
        "label": label,
        "waiting": [
            {"op": c.op, "seq": c.seq, "bytes": c.nbytes, "ranks": sorted(by_coll[c])}
            for c in order
        ],
        "behind": rows,
    }
    return "; ".join(parts), doc


def _where(stack: RankStack | None) -> tuple[str, str]:
    """(`` and is at train.py:41 (fn)``, ``train.py:41``) from the rank's stack, or how it
    ended."""
    if stack is None:
        return "", ""
    if stack.state == EXITED:
        code = "" if stack.exit_code is None else f" with code {stack.exit_code}"
        return f" and exited{code}", ""
    head = stack.headline()
    if " at " in head and stack.state != "error":
        fn, at = head.split(" at ", 1)
        return f" and is at {at}" + (f" ({fn})" if fn != "<module>" else ""), at
    return "", ""


def _who(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + rank_list(ranks)


def _pg_labels(dumps: Mapping[int, Mapping[str, Any] | None]) -> dict[str, str]:
    """``pg 0``, or ``pg 1 (tp)`` for a group with a description of the user's."""
    out: dict[str, str] = {}
    for d in dumps.values():
        for e in (d or {}).get("entries") or []:
            if not isinstance(e, Mapping):
                continue
            pg = str(e.get("pg_id"))
            desc = ""
            names = e.get("process_group")
            if isinstance(names, list) and len(names) > 1:
                desc = str(names[1])
            out.setdefault(pg, f"pg {pg}" + (f" ({desc})" if desc and desc != "default_pg" else ""))
    return out


def _collective(e: Mapping[str, Any]) -> Collective | None:
    p2p = bool(e.get("is_p2p"))
    seq = _int(e.get("p2p_seq_id" if p2p else "collective_seq_id"))
    name = str(e.get("profiling_name") or "?")
    op = name.split(":", 1)[-1]  # gloo:all_reduce, nccl:all_reduce
    return Collective(str(e.get("pg_id")), seq, op, _nbytes(e), p2p)


def _nbytes(e: Mapping[str, Any]) -> int | None:
    sizes, dtypes = e.get("input_sizes") or [], e.get("input_dtypes") or []
    total = 0
    for shape, dtype in zip(sizes, dtypes, strict=False):
        width = DTYPE_BYTES.get(str(dtype))
        if width is None or not isinstance(shape, list):
            return None
        total += math.prod(int(x) for x in shape) * width
    return total


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


def _pg_order(pg: str) -> tuple[int, str]:
    return (_int(pg), pg)


def human_bytes(n: int) -> str:
    """``512 B``, ``4 KiB``, ``1.5 MiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if size == int(size) else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


__all__ = [
    "OFF",
    "Collective",
    "GroupState",
    "Report",
    "from_stacks",
    "human_bytes",
    "rank_states",
    "report",
]
