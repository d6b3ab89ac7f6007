"""A sweep for people and scripts: its points as a table or one JSON document (pure but for
printing); the Runner does the rest (expanding, stopping, waiting: runner/, sweeps/)."""

from __future__ import annotations

from typing import Any

from trainlaunch.cli import output
from trainlaunch.sweeps.status import SweepDescription


def doc(desc: SweepDescription) -> dict[str, Any]:
    """`status SWEEP --json`: the handle and one row per point."""
    return {"handle": str(desc.handle), "points": [p.to_dict() for p in desc.points]}


def text(desc: SweepDescription) -> str:
    """`status SWEEP`: a line of counts, then index, handle, state and values per point."""
    counts: dict[str, int] = {}
    for p in desc.points:
        counts[p.status.state.name] = counts.get(p.status.state.name, 0) + 1
    lines = [f"{desc.handle}\t" + " ".join(f"{k}={v}" for k, v in sorted(counts.items()))]
    for p in desc.points:
        lines.append(f"{p.index}\t{p.handle or '-'}\t{p.status.state.name}\t{p.label}")
    return "\n".join(lines)


def show(desc: SweepDescription, as_json: bool) -> None:
    """Print the sweep's points (a table for people, one document with --json)."""
    if as_json:
        output.emit_json(doc(desc))
    else:
        output.emit(text(desc))


__all__ = ["doc", "show", "text"]
