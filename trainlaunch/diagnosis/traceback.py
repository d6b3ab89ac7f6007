"""A rank's last Python traceback in its stderr, wherever it is (pure).

Deep stacks (the HF Trainer's, Lightning's) put the traceback's start far above the end, and
teardown warnings may follow it, so the whole stderr is searched for the last
``Traceback (most recent call last):``; the exception line is the first unindented line
after the frames (torch's ``[rankN]: `` prefix and chained exceptions are understood).
"""

from __future__ import annotations

import re

from trainlaunch.values import frozen

START = "Traceback (most recent call last):"
_TORCH_PREFIX = re.compile(r"^\[rank\d+\]: ?")
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<fn>.+))?$')
_CHAINED = (
    "During handling of the above exception",
    "The above exception was the direct cause",
)
_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")


@frozen
class Traceback:
    """The last traceback: its lines, the exception and where it was raised."""

    text: str  # the traceback's lines, torch's prefix removed
    exception: str  # the exception line: "ValueError: boom"
    type: str  # "ValueError", "torch.OutOfMemoryError"
    message: str  # "boom"
    where: str = ""  # "train.py:41" (the innermost frame)

    @property
    def short_type(self) -> str:
        """The type without its module: ``OutOfMemoryError``."""
        return self.type.rsplit(".", 1)[-1]


def strip_prefix(line: str) -> str:
    """The line without torch's ``[rankN]: `` prefix."""
    return _TORCH_PREFIX.sub("", line, count=1)


def last_traceback(stderr: str) -> Traceback | None:
    """The last traceback of stderr (None: there is none)."""
    lines = [strip_prefix(ln) for ln in stderr.splitlines()]
    starts = [i for i, ln in enumerate(lines) if ln.startswith(START)]
    if not starts:
        return None
    # a chained exception's traceback ends with the last one: start at the first of the chain
    first = starts[-1]
    for s in reversed(starts[:-1]):
        between = lines[s:first]
        if any(ln.startswith(_CHAINED) for ln in between):
            first = s
        else:
            break
    exc, where = "", ""
    i = starts[-1]
    block = lines[first:i]
    for ln in lines[i:]:
        block.append(ln)
        m = _FRAME.match(ln)
        if m:
            where = f"{m['file'].rsplit('/', 1)[-1]}:{m['line']}"
            continue
        if ln.startswith(START) or not ln.strip() or ln[:1] in (" ", "\t") or ln.startswith("^"):
            continue
        exc = ln.strip()
        break
    if not exc:
        return None
    m2 = _EXC.match(exc)
    etype = m2["type"] if m2 else exc.split(":", 1)[0]
    msg = (m2["msg"] or "") if m2 else exc.partition(":")[2].strip()
    return Traceback("\n".join(block), exc, etype, msg, where)


__all__ = ["START", "Traceback", "last_traceback", "strip_prefix"]
