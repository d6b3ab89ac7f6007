"""The all-reduce results of every node -> bus bandwidth per node, and the slow ones (pure).

Each node's local rank 0 reports (trainlaunch.rank.preflight) the bus bandwidth of the
all-reduce over every rank (the same collective for all: node 0's figure is shown) and of the
all-reduce among its own ranks (NVLink, PCIe or shared memory: that one tells the nodes
apart). A node whose own figure, at the largest size, is ``slow_factor`` times below the
median of the other nodes' fails the preflight; 0 only reports (options.slow_factor_for).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from trainlaunch.preflight.report import Problem, gbps


def _largest(result: Mapping[str, Any] | None) -> tuple[int, float] | None:
    if not result:
        return None
    size = max(result, key=int)
    return int(size), float(result[size]["busbw"])


def evaluate(
    results: Mapping[int, Mapping[str, Any]],
    names: Mapping[int, str],
    labels: Mapping[int, str],
    slow_factor: float,
) -> tuple[dict[str, Any], list[Problem]]:
    """(the bandwidth summary a verdict records, the problems: failed or slow nodes)."""
    problems = []
    for r, res in sorted(results.items()):
        if res.get("error") or not res.get("world"):
            why = str(res.get("error") or "no result")
            problems.append(
                Problem(
                    r,
                    "all-reduce",
                    why,
                    "ok",
                    f"{labels[r]}: the all-reduce failed: {why}",
                    names.get(r, ""),
                )
            )
    ok = {r: res for r, res in results.items() if res.get("world") and not res.get("error")}
    if not ok:
        return {}, problems
    first = ok[min(ok)]
    summary: dict[str, Any] = {
        "seconds": {k: first[k] for k in ("import_s", "init_s", "all_reduce_s") if k in first},
        "backend": first.get("backend"),
        "ranks": first.get("ranks"),
        "local_ranks": first.get("local_ranks"),
        "world": {s: v["busbw"] for s, v in first["world"].items()},
        "per_node": {},
    }
    local = {r: _largest(res.get("local")) for r, res in sorted(ok.items())}
    measured = {r: v for r, v in local.items() if v is not None}
    if len(measured) == len(results) and len(measured) > 1:  # a per-node figure to compare
        summary["size"] = next(iter(measured.values()))[0]
        summary["per_node"] = {str(r): bw for r, (_, bw) in measured.items()}
        if slow_factor:
            problems += _slow(summary["per_node"], names, labels, slow_factor)
    return summary, problems


def _slow(
    per_node: Mapping[str, float],
    names: Mapping[int, str],
    labels: Mapping[int, str],
    slow_factor: float,
) -> list[Problem]:
    out = []
    for key, bw in per_node.items():
        r = int(key)
        others = statistics.median(v for k, v in per_node.items() if k != key)
        if bw * slow_factor < others:
            out.append(
                Problem(
                    r,
                    "bandwidth",
                    gbps(bw),
                    f"{gbps(others)} (the others' median)",
                    f"{labels[r]}: {gbps(bw)} where the others have {gbps(others)} "
                    f"(> {slow_factor:g}x slower: a degraded link or a busy node)",
                    names.get(r, ""),
                )
            )
    return out
