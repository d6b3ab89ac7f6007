"""Who wrote a line: the node agent's console prefix read back into role, replica and rank.

A ``dist.ddp`` replica is a node agent whose console (the replica's log) carries torchrun's
``--tee`` prefix on every worker line: ``[<role><local_rank>]:`` or the user's
``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE``. :class:`TeeFormat` strips that prefix and names the
global rank (node rank x workers per node + local rank, the static rendezvous's numbering;
under an elastic rendezvous only the local rank is certain). Lines without it (the agent's own
``[trainlaunch] ...`` notes, any other replica) belong to the replica alone.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from string import Template
from typing import NamedTuple

from trainlaunch import settings, specs
from trainlaunch.errors import UsageError
from trainlaunch.values import frozen

TEMPLATE_ENV = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"


class Writer(NamedTuple):
    """Who wrote a line: a role's replica and, for a node agent's worker, its rank (a tuple:
    hashed in C, once per line of a merged log)."""

    role: str
    replica: int
    rank: int | None = None  # global rank (None: the replica itself, or not known)
    local_rank: int | None = None

    @property
    def is_rank(self) -> bool:
        """A worker of a node agent (not the replica's own line)."""
        return self.local_rank is not None

    def label(self) -> str:
        """``train/0``, ``[train/1 rank 5]`` (or ``[train/1 local rank 1]``)."""
        if not self.is_rank:
            return f"{self.role}/{self.replica}"
        if self.rank is None:
            return f"[{self.role}/{self.replica} local rank {self.local_rank}]"
        return f"[{self.role}/{self.replica} rank {self.rank}]"


@frozen
class TeeFormat:
    """How one replica's console marks its workers' lines, and how their ranks are numbered."""

    role: str  # trainlaunch's role name
    replica: int
    pattern: re.Pattern[str] | None  # None: the console carries no prefix (--tee 0)
    nproc: int | None  # workers per node (None: not a number, e.g. "gpu")
    static: bool = True  # a static rendezvous: the node's rank is known
    node_rank: int | None = None  # the node's rank (None: the replica id)
    default_prefix: str | None = None  # the agent's role when it writes torchrun's own prefix
    _seen: dict[str, Writer] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def literal_prefix(self, local_rank: int) -> bytes | None:
        """``[default3]:`` as the agent writes it (None: a template of the user's, or none)."""
        if self.default_prefix is None:
            return None
        return f"[{self.default_prefix}{local_rank}]:".encode()

    @property
    def first_rank(self) -> int:
        """The global rank of this node's local rank 0 (static rendezvous)."""
        return (self.replica if self.node_rank is None else self.node_rank) * (self.nproc or 0)

    def split(self, line: str) -> tuple[Writer, str]:
        """(who wrote it, the text the writer wrote)."""
        m = self.pattern.match(line) if self.pattern is not None else None
        if m is None:
            return Writer(self.role, self.replica), line
        key = m.group(0)
        who = self._seen.get(key)
        if who is None:
            groups = m.groupdict()
            lr = int(groups["local_rank"]) if groups.get("local_rank") else None
            rank = int(groups["rank"]) if groups.get("rank") else None
            if rank is None and lr is not None and self.static and self.nproc:
                rank = self.first_rank + lr
            if lr is None:  # a template naming only ${rank}
                lr = rank if rank is not None else 0
            who = self._seen[key] = Writer(self.role, self.replica, rank, lr)
        return who, line[m.end() :]

    def writers(self) -> list[Writer]:
        """Every worker this replica runs, when known (what a line all of them wrote needs)."""
        if self.pattern is None or not self.nproc:
            return []
        return [
            Writer(
                self.role,
                self.replica,
                self.first_rank + lr if self.static else None,
                lr,
            )
            for lr in range(self.nproc)
        ]


def relabel(lines: bytes, label: bytes, by_prefix: Mapping[bytes, bytes]) -> bytes:
    """Whole lines (each ending in a newline) with one label each, at C speed (no per-line
    Python): a line that starts with a key of by_prefix gets that key's value instead of the
    key, any other line gets label; an empty line (or one that only had a key) gets none.

    A pass per key over the bytes (bytes.replace): an 8-rank log costs ~10 passes, a few
    times a plain copy's one (bench: `logs` of a 190 MiB agent log, docs/logs.md).
    """
    # a label goes only where a line starts: label + tee is found there and nowhere else
    body = label + lines.replace(b"\n", b"\n" + label)
    for tee, rank_label in by_prefix.items():
        body = body.replace(label + tee, rank_label)
    if b"]:\n" in lines or b"\n\n" in lines or lines.startswith(b"\n"):
        for shown in {label, *by_prefix.values()}:  # an empty line: its label, then a newline
            if shown:
                body = body.replace(shown + b"\n", b"\n")
    return body[: len(body) - len(label)] if label else body


def prefix_pattern(template: str | None, agent_role: str) -> re.Pattern[str]:
    """A regex matching the agent's line prefix (torchrun's default or the user's template)."""
    if not template:
        return re.compile(re.escape(f"[{agent_role}") + r"(?P<local_rank>\d+)\]:")
    fields = {
        "role_name": re.escape(agent_role),
        "rank": r"(?P<rank>\d+)",
        "local_rank": r"(?P<local_rank>\d+)",
    }
    parts, seen, pos = [], set(), 0
    for m in Template.pattern.finditer(template):
        parts.append(re.escape(template[pos : m.start()]))
        name = m.group("named") or m.group("braced")
        if name in fields and name not in seen:
            parts.append(fields[name])
            seen.add(name)
        elif name in fields:  # a field named twice: the second copy matches the same text
            parts.append(rf"(?P={name})" if name != "role_name" else fields[name])
        else:
            parts.append(re.escape(m.group(0)))
        pos = m.end()
    parts.append(re.escape(template[pos:]))
    return re.compile("".join(parts))


def tee_format(role: specs.Role, replica: int, environ: Mapping[str, str]) -> TeeFormat:
    """The console format of one replica of role (a node agent's, else none).

    environ is the role's environment as the agent sees it (the template, PET_* defaults).
    """
    plain = TeeFormat(role.name, replica, None, None)
    args = role.agent_args
    if args is None:
        return plain
    from trainlaunch.agent import flags

    try:
        parsed = flags.parse(args, environ)
        tee = flags.parse_std(parsed.tee, "--tee")
        lo, hi = flags.parse_nnodes(parsed.nnodes)
    except (UsageError, SystemExit):  # a record of an older version: read lines as they are
        return plain
    if not tee and not environ.get(settings.TTY):  # --tee 0: the workers' lines carry no prefix
        return plain  # (unless their ranks had a terminal: agent/terminal.py records them so)
    try:
        nproc: int | None = int(parsed.nproc_per_node)
    except ValueError:
        nproc = None
    static = (parsed.rdzv_backend == "static" and lo == hi) or hi == 1
    node_rank = parsed.node_rank if "node_rank" in parsed.given else None
    template = environ.get(TEMPLATE_ENV)
    pattern = prefix_pattern(template, parsed.role)
    default = None if template else str(parsed.role)
    return TeeFormat(role.name, replica, pattern, nproc, static, node_rank, default)


__all__ = ["TEMPLATE_ENV", "TeeFormat", "Writer", "prefix_pattern", "relabel", "tee_format"]
