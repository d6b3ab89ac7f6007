"""Lines that must reach the reader at once and are never filtered out: warnings, errors,
tracebacks and debugger prompts (``breakpoint()``, torch's ``dist.breakpoint``).

Stateful per writer: a traceback's lines (``Traceback (most recent call last):`` through its
exception line, chained exceptions included) and a warning's source line (the indented line
Python's ``warnings`` prints after it) count with the line that started them. torch's own
``[rank3]: `` prefix on a rank's traceback is looked through.
"""

from __future__ import annotations

import re
from collections.abc import Hashable

TRACEBACK = "Traceback (most recent call last):"
_TORCH_PREFIX = re.compile(r"^\[rank\d+\]: ?")  # torch's excepthook marks a rank's traceback
_CHAINED = (
    "During handling of the above exception",
    "The above exception was the direct cause",
)
# no leading \w* (it backtracks at every letter): "UserWarning" is found from its "Warning"
_URGENT = re.compile(
    r"(?:warning|error|exception)\b|\bwarns?\b|\bfatal\b|\bcritical\b|\bpanic\b"
    r"|\babort(?:ed|ing)?\b|segmentation fault|\bkilled\b|out of memory|deprecat",
    re.IGNORECASE,
)
# what a line must contain (lowercased) for _URGENT to be worth running: `in` is C-fast, an
# ignore-case regex of alternatives costs tens of microseconds a line
_WORDS = (
    "warn", "error", "exception", "fatal", "critical", "panic", "abort", "segmentation",
    "killed", "out of memory", "deprecat",
)  # fmt: skip
_PDB = re.compile(r"^(?:\(Pdb\)|\(Pdb\+\+\)|ipdb>|> .+\(\d+\).*\(\)$|-> |--Return--|--Call--)")


def strip_torch_prefix(text: str) -> str:
    """The line without torch's ``[rankN]: `` traceback prefix."""
    return _TORCH_PREFIX.sub("", text, count=1)


class Urgency:
    """Tells, line by line and per writer, whether a line is urgent."""

    def __init__(self) -> None:
        self._in_traceback: set[Hashable] = set()
        self._after_warning: set[Hashable] = set()

    def __call__(self, who: Hashable, text: str) -> bool:
        """Whether this line (the next one who wrote) is urgent."""
        body = strip_torch_prefix(text)
        if who in self._in_traceback:
            if body.startswith(TRACEBACK) or body[:1] in (" ", "\t", "") or _chained(body):
                return True
            self._in_traceback.discard(who)  # the exception line ends the traceback
            return True
        if body.startswith(TRACEBACK):
            self._in_traceback.add(who)
            return True
        if who in self._after_warning:
            self._after_warning.discard(who)
            if body[:1] in (" ", "\t") and body.strip():
                return True  # the source line Python's warnings print under the warning
        if body[:1] in "(>-i" and _PDB.match(body):
            return True
        low = body.lower()
        if any(w in low for w in _WORDS) and _URGENT.search(body):
            self._after_warning.add(who)
            return True
        return False


def _chained(body: str) -> bool:
    return any(body.startswith(c) for c in _CHAINED)


__all__ = ["TRACEBACK", "Urgency", "strip_torch_prefix"]
