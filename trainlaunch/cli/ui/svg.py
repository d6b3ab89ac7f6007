"""Charts as SVG text, drawn on the server: a line chart (one line per rank or per sweep point,
linear or log y) and a scatter (a parameter against a metric). Pure: values in, text out.

Every word that came from an app (labels, metric names) is escaped, and no ``style``
attribute is written, so the page can place the SVG inline under its Content-Security-Policy.
Values that are not finite numbers (the metrics files spell them "NaN", "Infinity") and, on a
log axis, values <= 0 are left out and counted in a note under the chart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

from trainlaunch.values import frozen

# Tableau 10: distinguishable, also for the colour-blind (the legend names every line too)
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip
WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 40  # the plot area's margins
LEGEND_ROWS = 8  # more lines than this: the legend says how many more


@frozen
class Line:
    """One line of a line chart: its label and (x, y) points (y may be any JSON value)."""

    label: str
    points: Sequence[Sequence[object]]


@frozen
class Dot:
    """One point of a scatter: x a number or a category (text), y a value, what it is."""

    x: object
    y: object
    label: str


@frozen
class Axis:
    """Maps values to pixels between lo and hi (log: by their logarithm)."""

    lo: float
    hi: float
    log: bool
    start: float  # pixel of lo
    end: float  # pixel of hi

    def __call__(self, v: float) -> float:
        a, b, x = (
            (math.log10(self.lo), math.log10(self.hi), math.log10(v))
            if self.log
            else (self.lo, self.hi, v)
        )
        return self.start + (x - a) / (b - a) * (self.end - self.start) if b > a else self.start

    def ticks(self) -> list[float]:
        """Round values to label the axis with (powers of ten on a log axis)."""
        if self.log:
            first, last = math.floor(math.log10(self.lo)), math.ceil(math.log10(self.hi))
            stride = max(1, (last - first) // 6)
            out = [10.0**e for e in range(first, last + 1, stride)]
            return [t for t in out if self.lo <= t <= self.hi] or [self.lo, self.hi]
        return _linear_ticks(self.lo, self.hi)


def number(value: object) -> float | None:
    """A finite number, or None (text, None, NaN, infinities, booleans)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def line_chart(
    lines: Sequence[Line],
    title: str = "",
    x_label: str = "step",
    log_y: bool = False,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """One polyline per line (a circle where a line has a single point), axes and a legend."""
    kept, left_out = [], 0
    for line in lines:
        pts = [
            (x, y) for x, y in (_pair(p) for p in line.points) if x is not None and y is not None
        ]
        good = [(x, y) for x, y in pts if not log_y or y > 0]
        left_out += len(line.points) - len(good)
        kept.append((line.label, good))
    xs = [x for _, pts in kept for x, _ in pts]
    ys = [y for _, pts in kept for _, y in pts]
    if not xs:
        return _empty(title, "no points yet", width, height, left_out)
    ax = Axis(*_span(xs, False), False, LEFT, width - RIGHT)
    ay = Axis(*_span(ys, log_y), log_y, height - BOTTOM, TOP)
    body = _frame(ax, ay, title, x_label, width, height)
    for i, (label, pts) in enumerate(kept):
        colour = PALETTE[i % len(PALETTE)]
        tip = f"<title>{escape(label)}</title>"
        if len(pts) == 1:
            ((x, y),) = pts
            body.append(_circle(ax(x), ay(y), colour, tip, label))
        elif pts:
            coords = " ".join(f"{ax(x):.1f},{ay(y):.1f}" for x, y in sorted(pts))
            body.append(
                f'<polyline class="series" data-label={quoteattr(label)} fill="none" '
                f'stroke="{colour}" stroke-width="1.5" points="{coords}">{tip}</polyline>'
            )
    body += _legend([label for label, _ in kept], width)
    return _svg(body, title, width, height, left_out, log_y)


def scatter(
    dots: Sequence[Dot],
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    log_x: bool = False,
    log_y: bool = False,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """One circle per dot; x is numeric when every x is a number, else categories in order."""
    numeric = all(number(_as_number(d.x)) is not None for d in dots)
    categories = [] if numeric else list(dict.fromkeys(str(d.x) for d in dots))
    kept, left_out = [], 0
    for d in dots:
        y = number(d.y)
        x = number(_as_number(d.x)) if numeric else float(categories.index(str(d.x)))
        if y is None or x is None or (log_y and y <= 0) or (numeric and log_x and x <= 0):
            left_out += 1
            continue
        kept.append((x, y, d.label))
    if not kept:
        return _empty(title, "no points yet", width, height, left_out)
    if numeric:
        ax = Axis(*_span([x for x, _, _ in kept], log_x), log_x, LEFT, width - RIGHT)
    else:
        ax = Axis(-0.5, len(categories) - 0.5, False, LEFT, width - RIGHT)
    ay = Axis(*_span([y for _, y, _ in kept], log_y), log_y, height - BOTTOM, TOP)
    body = _frame(ax, ay, title, x_label, width, height, categories, y_label)
    for x, y, label in kept:
        body.append(_circle(ax(x), ay(y), PALETTE[0], f"<title>{escape(label)}</title>", label))
    return _svg(body, title, width, height, left_out, log_y)


def _pair(p: Sequence[object]) -> tuple[float | None, float | None]:
    return (number(p[0]), number(p[1])) if len(p) >= 2 else (None, None)


def _as_number(x: object) -> object:
    """A sweep's parameter values are text ("0.1"): read them as numbers when they are."""
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return x
    return x


def _span(values: Sequence[float], log: bool) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if log:  # a margin of the same share of the axis at both ends
        pad = 2.0 if lo == hi else (hi / lo) ** 0.04
        return lo / pad, hi * pad
    if lo == hi:
        pad = abs(lo) * 0.1 or 1.0
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.04
    return lo - pad, hi + pad


def _linear_ticks(lo: float, hi: float, want: int = 5) -> list[float]:
    raw = (hi - lo) / want
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 12) for i in range(int((hi - first) / step) + 1)]


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def _frame(
    ax: Axis,
    ay: Axis,
    title: str,
    x_label: str,
    width: int,
    height: int,
    categories: Sequence[str] = (),
    y_label: str = "",
) -> list[str]:
    """Title, grid lines, tick labels and axis names."""
    out = [f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    if title:
        out.append(
            f'<text x="{LEFT}" y="18" font-size="13" font-weight="600">{escape(title)}</text>'
        )
    for t in ay.ticks():
        y = ay(t)
        out.append(
            f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{_fmt(t)}</text>'
        )
    xticks = [(float(i), c) for i, c in enumerate(categories)] or [(t, _fmt(t)) for t in ax.ticks()]
    for t, text in xticks:
        x = ax(t)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{height - BOTTOM}" stroke="#f0f0f0"/>'
        )
        out.append(
            f'<text x="{x:.1f}" y="{height - BOTTOM + 16}" font-size="11" text-anchor="middle">'
            f"{escape(text)}</text>"
        )
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{width - LEFT - RIGHT}" '
        f'height="{height - TOP - BOTTOM}" fill="none" stroke="#999999"/>'
    )
    out.append(
        f'<text x="{(LEFT + width - RIGHT) / 2:.0f}" y="{height - 6}" font-size="11" '
        f'text-anchor="middle">{escape(x_label)}</text>'
    )
    if y_label:
        out.append(
            f'<text x="12" y="{(TOP + height - BOTTOM) / 2:.0f}" font-size="11" '
            f'text-anchor="middle" transform="rotate(-90 12 {(TOP + height - BOTTOM) / 2:.0f})">'
            f"{escape(y_label)}</text>"
        )
    return out


def _legend(labels: Sequence[str], width: int) -> list[str]:
    """Up to LEGEND_ROWS labels at the plot's top right, then how many more there are."""
    if len(labels) < 2:
        return []
    shown = labels[:LEGEND_ROWS]
    out = []
    for i, label in enumerate(shown):
        y = TOP + 14 + i * 14
        x = width - RIGHT - 8
        colour = PALETTE[i % len(PALETTE)]
        out.append(f'<rect x="{x - 4}" y="{y - 8}" width="8" height="8" fill="{colour}"/>')
        out.append(
            f'<text x="{x - 10}" y="{y}" font-size="11" text-anchor="end">{escape(label)}</text>'
        )
    if len(labels) > len(shown):
        y = TOP + 14 + len(shown) * 14
        out.append(
            f'<text x="{width - RIGHT - 10}" y="{y}" font-size="11" text-anchor="end">'
            f"and {len(labels) - len(shown)} more</text>"
        )
    return out


def _circle(x: float, y: float, colour: str, tip: str, label: str) -> str:
    return (
        f'<circle class="point" data-label={quoteattr(label)} cx="{x:.1f}" cy="{y:.1f}" r="4" '
        f'fill="{colour}" fill-opacity="0.8">{tip}</circle>'
    )


def _svg(
    body: list[str], title: str, width: int, height: int, left_out: int, log_y: bool = False
) -> str:
    if left_out:
        why = "not finite or <= 0 on the log scale" if log_y else "not finite numbers"
        body.append(
            f'<text x="{width - RIGHT}" y="{height - 6}" font-size="10" text-anchor="end" '
            f'fill="#777777">{left_out} value(s) left out ({escape(why)})</text>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label={quoteattr(title or "chart")} '
        f'font-family="sans-serif">' + "".join(body) + "</svg>"
    )


def _empty(title: str, why: str, width: int, height: int, left_out: int) -> str:
    body = [f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    if title:
        body.append(
            f'<text x="{LEFT}" y="18" font-size="13" font-weight="600">{escape(title)}</text>'
        )
    body.append(
        f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" font-size="12" text-anchor="middle" '
        f'fill="#777777">{escape(why)}</text>'
    )
    return _svg(body, title, width, height, left_out)


__all__ = ["Dot", "Line", "line_chart", "number", "scatter"]
