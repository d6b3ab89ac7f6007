"""``heartbeat()``: tell the launcher this rank is making progress (cheap, rate-limited).

The launcher injects ``TRAINLAUNCH_HEARTBEAT_PATH`` (``{rank}`` filled in here); a call touches
that file at most once per :data:`INTERVAL_S`, so calling it every step costs one clock read.
Without the variable (plain ``python``/``torchrun``) it does nothing. Never raises.
"""

from __future__ import annotations

import os
import time

from trainlaunch.settings import HEARTBEAT_PATH

INTERVAL_S = 1.0

_next = 0.0
_path: str | None = None
_key: tuple[str, str] | None = None


def _resolve() -> str | None:
    """This rank's heartbeat file (re-read when the environment changes)."""
    global _path, _key
    template, rank = os.environ.get(HEARTBEAT_PATH, ""), os.environ.get("RANK", "0")
    if (template, rank) != _key:
        _key = (template, rank)
        _path = template.replace("{rank}", rank.strip() or "0") if template else None
    return _path


def heartbeat() -> None:
    """Record progress of this rank (touches its heartbeat file at most once a second)."""
    global _next
    now = time.monotonic()
    if now < _next:
        return
    _next = now + INTERVAL_S
    path = _resolve()
    if path is None:
        return
    try:
        os.utime(path)
    except FileNotFoundError:
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "a"):
                pass
        except OSError:
            pass  # progress reporting must never fail the training
    except OSError:
        pass


__all__ = ["INTERVAL_S", "heartbeat"]
