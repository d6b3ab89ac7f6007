"""Fingerprints of every node -> the problems that stop the job (pure).

A fingerprint is the agent's ``facts.node_facts`` merged with the probe's answer
(trainlaunch.rank.preflight): JSON-able, keyed as there. For each field that must match, the
reference is the value most nodes have (ties: the lowest node rank's) and every node that
differs is a problem; some checks need no comparison (torch cannot be imported, a module the
entrypoint imports is found nowhere, NCCL_SOCKET_IFNAME names no interface of the node).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trainlaunch.preflight.facts import ifname_matches
from trainlaunch.preflight.options import PreflightOptions
from trainlaunch.preflight.report import Problem, node_labels

Fingerprint = Mapping[str, Any]
_NONE = "none"


def labels_of(fps: Sequence[Fingerprint]) -> dict[int, str]:
    """Each node's label in messages (see report.node_labels)."""
    return node_labels({int(fp["node_rank"]): str(fp.get("node") or "?") for fp in fps})


def _torch(fp: Fingerprint) -> str:
    return str(fp.get("torch") or f"not importable ({fp.get('torch_error') or 'no answer'})")


def _gpus(fp: Fingerprint) -> str:
    names = list(fp.get("gpus") or [])
    if not names:
        return _NONE
    counts = collections.Counter(names)
    return ", ".join(f"{n} x {name}" for name, n in counts.items())


# field -> how one node's value reads (what is compared and shown)
FIELD_VALUES: dict[str, Callable[[Fingerprint], str]] = {
    "python": lambda fp: str(fp.get("python") or "?"),
    "torch": _torch,
    "cuda": lambda fp: str(fp.get("cuda") or _NONE),
    "nccl": lambda fp: str(fp.get("nccl") or _NONE),
    "driver": lambda fp: str(fp.get("driver") or _NONE),
    "gpus": _gpus,
    "nccl_plugin": lambda fp: str(fp.get("nccl_plugin") or _NONE),
    "trainlaunch": lambda fp: str(fp.get("trainlaunch") or "?"),
}
FIELD_NAMES = {"nccl_plugin": "NCCL net plugin", "gpus": "GPUs"}


def compare(fps: Sequence[Fingerprint], opts: PreflightOptions) -> list[Problem]:
    """Every problem the fingerprints show (empty: the nodes agree and can run the job)."""
    fps = sorted(fps, key=lambda fp: int(fp["node_rank"]))
    labels = labels_of(fps)
    problems = _own_checks(fps, labels)
    for field, value in FIELD_VALUES.items():
        if opts.matches(field):
            problems += _differences(field, fps, labels, value, _why(field))
    if opts.matches("env") or opts.extra_env():
        for name in _env_names(fps, opts):
            problems += _differences(f"env {name}", fps, labels, _env_of(name), _no_why)
    if opts.matches("modules"):
        problems += _module_problems(fps, labels)
    return _merge_everywhere(problems, labels)


def _env_names(fps: Sequence[Fingerprint], opts: PreflightOptions) -> list[str]:
    names = {n for fp in fps for n in (fp.get("env") or {})}
    if not opts.matches("env"):
        names &= set(opts.extra_env())
    return sorted(names | set(opts.extra_env()))


def _env_of(name: str) -> Callable[[Fingerprint], str]:
    def value(fp: Fingerprint) -> str:
        env = fp.get("env") or {}
        return f"{name}={env[name]}" if env.get(name) else f"{name} unset"

    return value


def _no_why(fp: Fingerprint, ref: Fingerprint) -> str:
    return ""


def _differences(
    check: str,
    fps: Sequence[Fingerprint],
    labels: Mapping[int, str],
    value: Callable[[Fingerprint], str],
    why: Callable[[Fingerprint, Fingerprint], str],
) -> list[Problem]:
    values = {int(fp["node_rank"]): value(fp) for fp in fps}
    counts = collections.Counter(values.values())
    top = max(counts.values())
    reference = next(v for v in values.values() if counts[v] == top)  # ties: lowest rank's
    holders = [r for r, v in values.items() if v == reference]
    ref_fp = next(fp for fp in fps if int(fp["node_rank"]) == holders[0])
    out = []
    for fp in fps:
        r = int(fp["node_rank"])
        if values[r] == reference:
            continue
        has = "has" if len(holders) == 1 else "have"
        who = _names([labels[h] for h in holders])
        name = FIELD_NAMES.get(check, check)
        said = values[r] if check.startswith("env ") else f"{name} {values[r]}"
        extra = why(fp, ref_fp)
        out.append(
            Problem(
                node=r,
                check=check,
                found=values[r] + _where(check, fp),
                expected=reference,
                fix=f"{labels[r]}: {said} where {who} {has} {reference}"
                + (f" ({extra})" if extra else ""),
                node_name=str(fp.get("node") or ""),
            )
        )
    return out


def _where(check: str, fp: Fingerprint) -> str:
    if check == "torch" and fp.get("torch_path"):
        return f" ({fp['torch_path']})"
    if check == "python" and fp.get("executable"):
        return f" ({fp['executable']})"
    return ""


def _why(field: str) -> Callable[[Fingerprint, Fingerprint], str]:
    """What explains a node's different value (the PYTHONPATH entry, the interpreter)."""

    def why(fp: Fingerprint, ref: Fingerprint) -> str:
        if field in ("torch", "cuda", "nccl"):
            path = str(fp.get("torch_path") or "")
            for entry in str((fp.get("context") or {}).get("PYTHONPATH") or "").split(os.pathsep):
                if entry and path.startswith(entry.rstrip("/") + "/"):
                    return f"PYTHONPATH={entry}"
        if field in ("torch", "cuda", "nccl", "python", "trainlaunch"):
            if fp.get("executable") and fp.get("executable") != ref.get("executable"):
                return f"its python is {fp['executable']}, theirs {ref.get('executable')}"
            if field != "python" and fp.get("torch_path") != ref.get("torch_path"):
                return f"torch from {fp.get('torch_path') or '?'}"
        return ""

    return why


def _names(labels: Sequence[str]) -> str:
    if len(labels) <= 3:
        return ", ".join(labels)
    return f"{', '.join(labels[:3])} and {len(labels) - 3} more"


def _own_checks(fps: Sequence[Fingerprint], labels: Mapping[int, str]) -> list[Problem]:
    """What fails on a node whatever the others have."""
    out = []
    for fp in fps:
        r, name = int(fp["node_rank"]), str(fp.get("node") or "")
        if not fp.get("torch"):
            err = fp.get("torch_error") or "no answer"
            out.append(
                Problem(
                    r,
                    "torch",
                    f"not importable ({err})",
                    "torch",
                    f"{labels[r]}: {fp.get('executable') or 'the ranks’ python'} cannot import "
                    f"torch ({err}): install it there, or give dist.ddp --python",
                    name,
                )
            )
        ifaces = sorted((fp.get("interfaces") or {}).keys())
        for var, spec in (fp.get("ifname") or {}).items():
            if not ifname_matches(str(spec), ifaces):
                out.append(
                    Problem(
                        r,
                        f"env {var}",
                        f"{var}={spec}: no such interface",
                        ", ".join(ifaces),
                        f"{labels[r]}: {var}={spec} matches none of its interfaces "
                        f"({', '.join(ifaces)}): set it to one of them",
                        name,
                    )
                )
    return out


def _module_problems(fps: Sequence[Fingerprint], labels: Mapping[int, str]) -> list[Problem]:
    """Modules the entrypoint imports that some node (or every node) cannot find."""
    names: list[str] = []
    for fp in fps:
        names += [m for m in fp.get("modules") or {} if m not in names]
    out = []
    for m in names:
        where = {int(fp["node_rank"]): (fp.get("modules") or {}).get(m) for fp in fps}
        if all(where.values()):
            continue
        found = [r for r, origin in where.items() if origin]
        for fp in fps:
            r = int(fp["node_rank"])
            if where[r]:
                continue
            if found:
                has = "has" if len(found) == 1 else "have"
                fix = (
                    f"{labels[r]}: module {m} not found where {_names([labels[f] for f in found])} "
                    f"{has} it ({where[found[0]]})"
                )
            else:
                fix = (
                    f"module {m}, which the entrypoint imports, is found on no node: install it "
                    "or add its directory to PYTHONPATH"
                )
            out.append(
                Problem(
                    r,
                    f"module {m}",
                    "not found",
                    "found" if found else "importable",
                    fix,
                    str(fp.get("node") or ""),
                )
            )
    return out


def _merge_everywhere(problems: list[Problem], labels: Mapping[int, str]) -> list[Problem]:
    """One problem every node has (same check, same finding) is reported once."""
    nodes = len(labels)
    if nodes < 2:
        return problems
    groups: dict[tuple[str, str], list[Problem]] = {}
    for p in problems:
        groups.setdefault((p.check, p.found), []).append(p)
    out: list[Problem] = []
    for p in problems:
        same = groups[(p.check, p.found)]
        if len({q.node for q in same}) < nodes:
            out.append(p)
        elif p is same[0]:
            fix = p.fix.removeprefix(f"{labels.get(p.node or 0, '')}: ")
            out.append(Problem(None, p.check, p.found, p.expected, f"every node: {fix}", ""))
    return out
