"""An app's failure from its nodes' (pure): the cause, not its fallout.

Each node (a replica: one node agent, or one plain process) reports its own diagnosis. When
one rank dies, the ranks of the other nodes fail too, in the collective that lost its peer
(gloo's "Connection closed by peer", NCCL's watchdog timeout): those are fallout, named as
such under the cause. A ``ModuleNotFoundError`` on some nodes only means their environments
differ; a rendezvous that timed out names the nodes that never started.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from trainlaunch.diagnosis import values as v
from trainlaunch.diagnosis.values import Diagnosis
from trainlaunch.values import frozen

_NOT_CAUSES = (v.FALLOUT, v.RENDEZVOUS_TIMEOUT, v.STOPPED)


@frozen
class NodeOutcome:
    """One node (replica) of the app: who it is, and its diagnosis if it failed."""

    name: str  # "train/1"
    diagnosis: Diagnosis | None = None
    started: bool = True  # its process ever ran (an agent that never started: False)
    host: str = ""


def explain_app(nodes: Sequence[NodeOutcome]) -> Diagnosis | None:
    """The app's diagnosis (nodes in the order they failed); None when none failed."""
    failed = [n for n in nodes if n.diagnosis is not None]
    never = [n for n in nodes if not n.started]
    if not failed:
        return None
    causes = [n for n in failed if n.diagnosis.kind not in _NOT_CAUSES]  # type: ignore[union-attr]
    root = causes[0] if causes else failed[0]
    d = root.diagnosis
    assert d is not None
    evidence = list(d.evidence)
    line = d.line
    if d.kind == v.RENDEZVOUS_TIMEOUT and never:
        line = f"{_names(never)} never started; {d.line}"
    started = [n for n in nodes if n.started]
    if d.kind == v.MODULE_MISSING and len(started) > 1:
        missing = [n for n in failed if n.diagnosis.kind == v.MODULE_MISSING]  # type: ignore[union-attr]
        if len(missing) < len(started):
            where = ", ".join(n.name + _on(n) for n in missing)
            line = f"{d.line} on {where} only: the nodes' environments differ"
    if len(nodes) > 1:
        evidence += [
            f"fallout on {n.name}: {n.diagnosis.line}"  # type: ignore[union-attr]
            for n in failed
            if n is not root and n.diagnosis.kind == v.FALLOUT  # type: ignore[union-attr]
        ]
    if len(nodes) > 1 and root.name not in line:
        host = _on(root).strip(" ()")
        line = f"{line} ({root.name}" + (f" on {host})" if host else ")")
    return dataclasses.replace(d, line=line, evidence=tuple(evidence))


def _on(n: NodeOutcome) -> str:
    host = n.host or (n.diagnosis.host if n.diagnosis else "")
    return f" ({host})" if host else ""


def _names(nodes: Sequence[NodeOutcome]) -> str:
    return ("node " if len(nodes) == 1 else "nodes ") + ", ".join(n.name for n in nodes)


__all__ = ["NodeOutcome", "explain_app"]
