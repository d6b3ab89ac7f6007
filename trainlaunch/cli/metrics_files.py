"""Reading an app's own metrics files, whether an ``--image`` path can be written, and the
charting library behind it.

Shared by ``metrics`` (one app) and the side-by-side view of several apps (compare_view). Where
an app's metrics files are is the backend's answer (``Runner.metrics_location``, one rule in
metrics/location.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainlaunch.errors import UsageError
from trainlaunch.specs import AppState

IMAGE_FORMATS = ("eps", "jpeg", "jpg", "pdf", "png", "ps", "svg", "svgz", "tif", "tiff", "webp")


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
        raise UsageError("--image needs matplotlib", hint=plot_hint()) from None
    return plt


def plot_hint(prefix: str | None = None, source: Path | None = None) -> str:
    """How this installation gets matplotlib (extras.py's rule for every optional extra)."""
    from trainlaunch.cli.extras import install_hint

    return install_hint("plot", prefix, source)


def save_chart(
    fig: Any, ax: Any, path: str, values: list[float], log_y: bool, steps: bool = True
) -> None:
    """Finish and write a chart: a log y scale when asked or when the values span more than
    three decades, the legend beside the axes (never over the curves), whole steps on the x
    axis; a usage error when the file cannot be written."""
    from matplotlib.ticker import MaxNLocator

    from trainlaunch.metrics.compare import spans_decades

    if steps:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if log_y or spans_decades(values):
        ax.set_yscale("log")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize="small")
    ax.grid(True, which="major", alpha=0.3)
    try:
        fig.savefig(path, bbox_inches="tight")  # "tight": the legend outside is kept
    except (OSError, ValueError) as e:
        raise UsageError(
            f"cannot write --image {path!r}: {getattr(e, 'strerror', None) or e}"
        ) from None
    finally:
        pyplot().close(fig)


def read_own(
    read: Callable[[str], Any], where: str, state: AppState, handle: str
) -> tuple[Any, str | None]:
    """The metrics at an app's own path, and None; when its ranks wrote no metrics file: empty
    data and the note that says why, by the app's state (docs/cli.md: exit 0, not an error)."""
    from trainlaunch.metrics.reader import MetricsData, NoMetricsFiles

    try:
        return read(where), None
    except NoMetricsFiles:
        pass
    if state.is_terminal or state == AppState.UNKNOWN:
        return MetricsData(), (
            f"{handle}: this app logged no metrics (its ranks do not use trainlaunch.rank); "
            f"nothing at {where} (metrics written elsewhere: --path DIR_OR_GLOB)"
        )
    return MetricsData(), f"{handle}: no records yet ({state.name}; its ranks write to {where})"
