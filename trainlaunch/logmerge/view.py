"""The view ``logs`` prints: each line with its one prefix, filtered by rank, maybe merged.

:func:`view` takes the lines of every followed replica as ``(source, TeeFormat, line)`` in
arrival order (``None`` when nothing arrived for a while, so waiting lines come out on time)
and yields ``(source, Merged)``: one writer each without merging, several where ranks wrote
the same line (source None: a merged line may come from several). ``ranks`` keeps those ranks' lines and every other
rank's urgent ones (warnings, errors, tracebacks, debugger prompts: logmerge/urgent.py).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Iterable, Iterator, Sequence

from trainlaunch.logmerge.merge import Merged, Merger
from trainlaunch.logmerge.ranks import TeeFormat, Writer
from trainlaunch.logmerge.urgent import Urgency
from trainlaunch.values import frozen

Item = tuple[Hashable, TeeFormat, str]  # (the caller's name for the source, its format, a line)


@frozen
class ViewOptions:
    """How to show the lines: merge mode (None: one line per line), ranks kept, the window."""

    merge: str | None = None  # exact | fuzzy | None
    ranks: Container[int] | None = None  # None: every rank
    window: float = 0.5  # seconds (following) or lines (a finished log)


def expected_writers(formats: Iterable[TeeFormat]) -> list[Writer]:
    """Everyone whose copy completes a shared line: each agent's workers, each other replica."""
    out: list[Writer] = []
    for f in formats:
        out.extend(f.writers() if f.pattern is not None else [Writer(f.role, f.replica)])
    return out


def view(
    items: Iterable[Item | None],
    formats: Sequence[TeeFormat],
    options: ViewOptions,
    clock: Callable[[], float],
) -> Iterator[tuple[Hashable, Merged]]:
    """The lines to print, in order (see the module docstring)."""
    urgency = Urgency()
    merger = (
        Merger(expected_writers(formats), options.window, options.merge) if options.merge else None
    )
    for item in items:
        if item is None:
            if merger is not None:
                yield from _unnamed(merger.due(clock()))
            continue
        source, fmt, line = item
        who, text = fmt.split(line)
        urgent = urgency(who, text)
        if not (urgent or _kept(who, options.ranks)):
            continue
        if merger is None:
            yield source, Merged(text, (who,), urgent)
        else:
            yield from _unnamed(merger.feed(who, text, clock(), urgent))
    if merger is not None:
        yield from _unnamed(merger.flush())


def _unnamed(lines: Iterable[Merged]) -> Iterator[tuple[Hashable, Merged]]:
    for m in lines:
        yield None, m


def _kept(who: Writer, ranks: Container[int] | None) -> bool:
    return ranks is None or not who.is_rank or who.rank in ranks


__all__ = ["Item", "ViewOptions", "expected_writers", "view"]
