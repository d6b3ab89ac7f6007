"""Lines several ranks wrote, shown once with the set of ranks, in the order the first copy came.

A line joins the oldest open group with the same text that this writer has not joined yet (so
the k-th ``Epoch 3: starting`` of each rank meets the others' k-th), else it opens a group. A
group is shown once every expected writer joined it, or once it is ``window`` old (seconds
when following a live log, lines when reading a finished one); groups come out in the order
their first copy arrived, so a line waits at most ``window`` for the others. ``fuzzy``
compares lines with their numbers blanked out and shows differing numbers as a range
(``loss 0.41..0.44``).
"""

from __future__ import annotations

import dataclasses
import re
from collections import deque
from collections.abc import Iterable, Sequence

from trainlaunch.logmerge.ranks import Writer
from trainlaunch.stacks.values import rank_list
from trainlaunch.values import frozen

EXACT, FUZZY = "exact", "fuzzy"
MODES = (EXACT, FUZZY)
FOLLOW_WINDOW_S = 0.5  # a followed line is shown at most this long after it arrived
READ_WINDOW_LINES = 2000  # a finished log: copies further apart than this are not merged
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


@frozen
class Merged:
    """One line as shown: its text and everyone who wrote it."""

    text: str
    writers: tuple[Writer, ...]
    urgent: bool = False

    @property
    def ranks(self) -> tuple[int, ...]:
        """The global ranks that wrote it (sorted; writers without a rank left out)."""
        return tuple(sorted({w.rank for w in self.writers if w.rank is not None}))

    def label(self) -> str:
        """``[train ranks 0-7]``, ``[train/1 ranks 4,6]``; one writer: its own label."""
        if len(self.writers) == 1:
            return self.writers[0].label()
        roles = sorted({w.role for w in self.writers})
        replicas = sorted({w.replica for w in self.writers})
        role = ",".join(roles)
        where = f"{role}/{replicas[0]}" if len(replicas) == 1 else role
        if not any(w.is_rank for w in self.writers):  # replicas that are not agents
            return f"[{role}/{rank_list(replicas)}]"
        ranks = self.ranks
        if len(ranks) == len(self.writers):
            return f"[{where} ranks {rank_list(ranks)}]"
        locals_ = sorted({w.local_rank for w in self.writers if w.local_rank is not None})
        return f"[{where} local ranks {rank_list(locals_)}]"

    def to_dict(self) -> dict[str, object]:
        """JSON-able (stable keys)."""
        return {
            "ranks": list(self.ranks),
            "writers": [
                {"role": w.role, "replica": w.replica, "rank": w.rank, "local_rank": w.local_rank}
                for w in self.writers
            ],
            "line": self.text,
            "urgent": self.urgent,
        }


@dataclasses.dataclass
class _Group:
    key: str
    first: str
    at: float
    urgent: bool
    writers: list[Writer]
    numbers: list[list[str]]
    done: bool = False


class Merger:
    """Feed (writer, text, now); take what is due. One instance per stream of lines."""

    def __init__(self, expected: Iterable[Writer], window: float, mode: str = EXACT) -> None:
        if mode not in MODES:
            raise ValueError(f"merge mode {mode!r}: use {' or '.join(MODES)}")
        self.expected = frozenset(expected)
        self.window, self.fuzzy = window, mode == FUZZY
        self._queue: deque[_Group] = deque()  # open groups, in order of their first copy
        self._open: dict[str, list[_Group]] = {}  # by key, oldest first

    def feed(self, who: Writer, text: str, now: float, urgent: bool = False) -> list[Merged]:
        """Add one line; the lines now due, in order."""
        key = _NUMBER.sub("\0", text) if self.fuzzy else text
        numbers = _NUMBER.findall(text) if self.fuzzy else []
        group = next((g for g in self._open.get(key, ()) if who not in g.writers), None)
        if group is None:
            group = _Group(key, text, now, urgent, [], [])
            self._queue.append(group)
            self._open.setdefault(key, []).append(group)
        group.writers.append(who)
        group.numbers.append(numbers)
        group.urgent = group.urgent or urgent
        if self.expected and self.expected <= set(group.writers):
            group.done = True
        return self.due(now)

    def due(self, now: float) -> list[Merged]:
        """The lines to show now: complete or old enough, and everything before them."""
        out: list[Merged] = []
        while self._queue:
            head = self._queue[0]
            if not (head.done or now - head.at >= self.window):
                break
            out.append(self._take())
        return out

    def flush(self) -> list[Merged]:
        """Everything still waiting (the stream ended)."""
        out = []
        while self._queue:
            out.append(self._take())
        return out

    def next_due(self) -> float | None:
        """When (in the window's unit) the oldest waiting line is due; None when none waits."""
        if not self._queue:
            return None
        return self._queue[0].at + self.window

    def _take(self) -> Merged:
        g = self._queue.popleft()
        same = self._open[g.key]
        same.remove(g)
        if not same:
            del self._open[g.key]
        text = _ranges(g.first, g.numbers) if self.fuzzy and len(g.writers) > 1 else g.first
        return Merged(text, tuple(sorted(g.writers, key=_order)), g.urgent)


def _order(w: Writer) -> tuple[int, int, int]:
    return (w.rank if w.rank is not None else -1, w.replica, w.local_rank or 0)


def _ranges(first: str, numbers: Sequence[Sequence[str]]) -> str:
    """first with each number that differs between the copies shown as ``low..high``."""
    columns = list(zip(*numbers, strict=True)) if numbers else []
    pieces, pos = [], 0
    for i, m in enumerate(_NUMBER.finditer(first)):
        pieces.append(first[pos : m.start()])
        values = columns[i] if i < len(columns) else (m.group(0),)
        if len(set(values)) == 1:
            pieces.append(m.group(0))
        else:
            low = min(values, key=float)
            high = max(values, key=float)
            pieces.append(f"{low}..{high}")
        pos = m.end()
    pieces.append(first[pos:])
    return "".join(pieces)


__all__ = ["EXACT", "FOLLOW_WINDOW_S", "FUZZY", "MODES", "READ_WINDOW_LINES", "Merged", "Merger"]
