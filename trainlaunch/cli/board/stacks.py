"""Where every rank of a running app is now, as ``stack --json --collectives`` prints it, with
the grouped text ``stack`` shows: what `ui` shows when asked (a dump costs a py-spy run per
rank, so a view asks for it on demand, never on every refresh)."""

from __future__ import annotations

import time
from typing import Any


def stacks_view(runner: Any, handle: str, native: bool = False) -> dict[str, Any]:
    """The dump's groups and ranks, the collective view and the grouped text (UsageError once
    the app has ended, AppNotFound: no such app)."""
    from trainlaunch.stacks import values as stacks
    from trainlaunch.stacks.collectives import from_stacks

    taken = time.time()
    dumped = runner.stacks(handle, native)
    view = from_stacks(dumped)
    return {
        "handle": handle,
        **stacks.document(dumped, taken),
        "collectives": view.to_dict(),
        "text": stacks.render_text(stacks.group(dumped)),
    }


__all__ = ["stacks_view"]
