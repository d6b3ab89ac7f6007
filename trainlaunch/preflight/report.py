"""A preflight's outcome as a value (:class:`Verdict`) and as the text a node agent prints.

A failed preflight prints one table of what differs or fails (node, check, what it found,
what was expected), then one line per problem naming the node and the fix::

    preflight FAILED: 2 nodes, 1 problem (2.4 s); no rank started
      node  check  found                          expected
      n2    torch  2.12.0 (/opt/old/torch)        2.13.0
      n2: torch 2.12.0 where n1 has 2.13.0 (PYTHONPATH=/opt/old)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from trainlaunch.values import frozen

EVERY_NODE = "every node"


@frozen
class Problem:
    """One thing that stops the job: on which node (None: every node), what, and the fix."""

    node: int | None
    check: str  # torch, env NCCL_DEBUG, module foo, store, all-reduce, bandwidth, ...
    found: str
    expected: str
    fix: str  # one line: names the node and what to do
    node_name: str = ""  # the scheduler's name of the node (what Slurm's --exclude takes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Problem:
        """Inverse of to_dict."""
        node = d.get("node")
        return cls(
            node=int(node) if node is not None else None,
            check=str(d.get("check", "")),
            found=str(d.get("found", "")),
            expected=str(d.get("expected", "")),
            fix=str(d.get("fix", "")),
            node_name=str(d.get("node_name", "")),
        )


@frozen
class Verdict:
    """A preflight's outcome for the whole job (node 0's agent decides; every node reads it)."""

    nodes: int
    problems: tuple[Problem, ...] = ()
    bandwidth: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    stage: str = "compare"  # how far it got: connect, compare (fingerprints), all-reduce
    names: Mapping[int, str] = dataclasses.field(default_factory=dict)  # node rank -> name

    @property
    def ok(self) -> bool:
        """True when nothing stops the job."""
        return not self.problems

    def bad_nodes(self) -> list[str]:
        """The scheduler's names of the nodes the problems are about (none for every-node ones)."""
        out: list[str] = []
        for p in self.problems:
            if p.node is not None and p.node_name and p.node_name not in out:
                out.append(p.node_name)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (what node 0 sets in the store and agent.json records)."""
        return {
            "ok": self.ok,
            "nodes": self.nodes,
            "stage": self.stage,
            "seconds": round(self.seconds, 3),
            "problems": [p.to_dict() for p in self.problems],
            "bandwidth": dict(self.bandwidth),
            "names": {str(r): n for r, n in self.names.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Verdict:
        """Inverse of to_dict."""
        return cls(
            nodes=int(d.get("nodes") or 0),
            problems=tuple(Problem.from_dict(p) for p in d.get("problems") or ()),
            bandwidth=dict(d.get("bandwidth") or {}),
            seconds=float(d.get("seconds") or 0.0),
            stage=str(d.get("stage") or "compare"),
            names={int(r): str(n) for r, n in (d.get("names") or {}).items()},
        )

    def labels(self) -> dict[int, str]:
        """How messages name each node (see node_labels; with the rank when some are unknown)."""
        return node_labels(self.names, ranks=len(self.names) < self.nodes)


def node_labels(names: Mapping[int, str], ranks: bool = False) -> dict[int, str]:
    """How messages name each node: its name when names are unique, else ``node R (name)``."""
    unique = len(set(names.values())) == len(names) and not ranks
    return {r: (n if unique else f"node {r} ({n})") for r, n in names.items()}


def table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Rows as aligned columns (the first row is the header)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        (indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))).rstrip()
        for r in rows
    ]


def gbps(bytes_per_s: float) -> str:
    """Bus bandwidth as people read it (GB/s, decimal, as nccl-tests)."""
    return f"{bytes_per_s / 1e9:.3g} GB/s"


def render(verdict: Verdict, labels: Mapping[int, str]) -> str:
    """The text every node agent prints (on stderr, so in the replica's log)."""
    n = len(verdict.problems)
    where = f"{verdict.nodes} node{'s' * (verdict.nodes != 1)}"
    if verdict.ok:
        head = f"preflight passed: {where} in {verdict.seconds:.1f} s{_parts(verdict.bandwidth)}"
        return "\n".join([head, *bandwidth_lines(verdict.bandwidth, labels)]) + "\n"
    lines = [
        f"preflight FAILED: {where}, {n} problem{'s' * (n != 1)} ({verdict.seconds:.1f} s); "
        "no rank started"
    ]
    rows = [["node", "check", "found", "expected"]]
    for p in verdict.problems:
        label = EVERY_NODE if p.node is None else labels.get(p.node, f"node {p.node}")
        rows.append([label, p.check, _cut(p.found), _cut(p.expected)])
    lines += table(rows)
    lines += [f"  {p.fix}" for p in verdict.problems]
    lines += bandwidth_lines(verdict.bandwidth, labels)
    return "\n".join(lines) + "\n"


def bandwidth_lines(bw: Mapping[str, Any], labels: Mapping[int, str]) -> list[str]:
    """One line for the world's all-reduce, one for the nodes' own (when measured)."""
    if not bw.get("world"):
        return []
    lines = [
        f"  all-reduce ({bw.get('backend')}, {bw.get('ranks')} ranks): "
        + ", ".join(f"{_size(int(s))} {gbps(v)}" for s, v in bw["world"].items())
    ]
    per_node = bw.get("per_node") or {}
    if per_node:
        lines.append(
            f"  per node ({_size(int(bw.get('size') or 0))}, its {bw.get('local_ranks')} ranks): "
            + ", ".join(f"{labels.get(int(r), r)} {gbps(v)}" for r, v in per_node.items())
        )
    return lines


def _parts(bw: Mapping[str, Any]) -> str:
    """Where node 0's probe spent the time: importing torch, meeting, the all-reduces."""
    seconds = bw.get("seconds") or {}
    names = (
        ("import_s", "torch import"),
        ("init_s", "process group"),
        ("all_reduce_s", "all-reduce"),
    )
    parts = [f"{what} {seconds[k]:.1f} s" for k, what in names if seconds.get(k) is not None]
    return f" ({', '.join(parts)})" if parts else ""


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def _cut(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
