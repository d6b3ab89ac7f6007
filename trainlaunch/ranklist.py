"""The rank-list grammar: ``0,2-7`` <-> {0, 2, 3, 4, 5, 6, 7} (pure; `stack --rank`, `logs
--ranks`, and every "ranks 0,2-7" trainlaunch prints)."""

from __future__ import annotations

from collections.abc import Container, Iterable


def rank_list(ranks: Iterable[int]) -> str:
    """``0,2-7`` from [0, 2, 3, 4, 5, 6, 7]."""
    out: list[str] = []
    nums = sorted(set(ranks))
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ",".join(out)


def rank_ranges(text: str) -> tuple[tuple[int, int], ...]:
    """``0,2-7`` -> ((0, 0), (2, 7)), checked and never expanded (``0-99999999999`` is one
    pair); ValueError naming the bad part."""
    out = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise ValueError(f"not a rank or range: {part.strip()!r}") from None
        if a < 0 or b < a:
            raise ValueError(f"not a rank or range: {part.strip()!r}")
        out.append((a, b))
    return tuple(out)


def parse_rank_list(text: str, world: int | None = None) -> frozenset[int]:
    """``0,2-7`` -> {0, 2, ..., 7}; ValueError naming the bad part. With world (how many ranks
    exist), only ranks below it are expanded: what a range asks costs what the app has."""
    out: set[int] = set()
    for a, b in rank_ranges(text):
        out.update(range(a, b + 1 if world is None else min(b + 1, max(world, a))))
    return frozenset(out)


class RankRanges(Container[int]):
    """A rank list kept as its ranges: membership without expanding them (``logs --ranks``)."""

    def __init__(self, text: str) -> None:
        self.ranges = rank_ranges(text)

    def __contains__(self, rank: object) -> bool:
        return isinstance(rank, int) and any(a <= rank <= b for a, b in self.ranges)

    def beyond(self, world: int) -> str:
        """The ranks asked for from world on, as a rank list (empty: none)."""
        return ",".join(
            f"{max(a, world)}" + (f"-{b}" if b > max(a, world) else "")
            for a, b in self.ranges
            if b >= world
        )


__all__ = ["RankRanges", "parse_rank_list", "rank_list", "rank_ranges"]
