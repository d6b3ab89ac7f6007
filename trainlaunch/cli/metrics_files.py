"""Where an app's metrics files are, and whether an ``--image`` path can be written.

Shared by ``metrics`` (one app) and the side-by-side view of several apps (compare_view).
"""

from __future__ import annotations

import os
import string
from typing import Any

from trainlaunch.errors import UsageError

IMAGE_FORMATS = ("eps", "jpeg", "jpg", "pdf", "png", "ps", "svg", "svgz", "tif", "tiff", "webp")


def metrics_location(resp: Any) -> str:
    """The directory or glob holding an app's metrics files (from its rank settings)."""
    settings = {}
    if resp.app is not None:
        settings = dict(resp.app.metadata.get("trainlaunch") or {})
    path = settings.get("metrics_path") or resp.metadata.get("settings", {}).get("metrics_path")
    if not path:
        raise UsageError(
            f"app {resp.app_id} recorded no metrics path", hint="pass --path DIR_OR_GLOB"
        )
    path = string.Template(path).safe_substitute(app_id=resp.app_id)
    return path.replace("{rank}", "*")


def check_image_path(path: str) -> None:
    """Refuse an --image FILE that cannot be written before any metrics are read."""
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    if ext not in IMAGE_FORMATS:
        raise UsageError(
            f"--image {path!r}: unknown image format {ext or '(none)'!r}",
            hint=f"end the name with one of: {', '.join('.' + e for e in IMAGE_FORMATS)}",
        )
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"--image {path!r}: no directory {parent}")


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files, no display); a usage error without it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(
            "--image needs matplotlib", hint="pip install 'trainlaunch[plot]'"
        ) from None
    return plt
