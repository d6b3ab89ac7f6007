"""Rates from successive readings: steps/s and CPU use, kept between two refreshes of a view
(and the metrics files as last read, so that a refresh reads only what was appended)."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainlaunch.metrics.latest import LatestFiles


class RateBook:
    """The last reading of each counter; :meth:`rate` is its change per second since then."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: dict[Hashable, tuple[float, float]] = {}
        self._rates: dict[Hashable, float] = {}
        self._files: LatestFiles | None = None

    @property
    def files(self) -> LatestFiles:
        """The metrics files as the view last read them (metrics/latest.py)."""
        if self._files is None:
            from trainlaunch.metrics.latest import LatestFiles

            self._files = LatestFiles()
        return self._files

    def rate(self, key: Hashable, value: float | None) -> float | None:
        """Change of ``value`` per second since the last reading of ``key`` (None: first
        reading, or a counter that went back, as a restarted run's step does)."""
        if value is None:
            return None
        now = self._clock()
        last = self._seen.get(key)
        if last is not None and now - last[0] < 0.2:  # too soon: the last rate stands
            return self._rates.get(key)
        self._seen[key] = (now, value)
        if last is None or value < last[1] or now <= last[0]:
            self._rates.pop(key, None)
            return None
        self._rates[key] = (value - last[1]) / (now - last[0])
        return self._rates[key]


__all__ = ["RateBook"]
