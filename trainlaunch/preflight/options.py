"""The ``preflight*`` options of every backend and what they ask of the node agents.

``run --preflight`` is ``--cfg preflight=true``; like every option it can also be set in the
config file (``[scheduler.slurm] preflight = true``). The runner turns the options into the
node agents' ``--preflight*`` flags (agent/request.py), so ``--dryrun`` shows them in argv.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainlaunch.errors import UsageError
from trainlaunch.options import at_least, runopts
from trainlaunch.values import frozen

# What the nodes must share, by default all of it. ``env`` is every NCCL_*, TORCH_* and
# CUDA_* variable; ``env:NAME`` adds (and matches) one more variable.
FIELDS = (
    "python",
    "torch",
    "cuda",
    "nccl",
    "driver",
    "gpus",
    "nccl_plugin",
    "env",
    "modules",
    "trainlaunch",
)
# A node this many times below the others' median fails. By default NCCL's figures only: GPU
# links are steady, while CPU (gloo) all-reduces on shared or loaded machines vary by more
# than 2x from one run to the next; an explicit preflight_slow_factor judges both.
DEFAULT_SLOW_FACTOR = 2.0
DEFAULT_TIMEOUT = 300.0  # nodes of one job may start minutes apart (pods pulling an image)


def check_match(value: Any) -> str | None:
    """Why a preflight_match list is refused (None: fine)."""
    for item in value:
        name = item.split(":", 1)[1] if item.startswith("env:") else None
        if item not in FIELDS and not name:
            return f"unknown field {item!r}; fields: {', '.join(FIELDS)}, env:NAME"
    return None


def add_runopts(opts: runopts, exclude_bad_nodes: bool = False) -> None:
    """Declare the preflight options (exclude_bad_nodes: the backend can resubmit without nodes)."""
    opts.add(
        "preflight",
        bool,
        "before the ranks start, check that every node of a dist.ddp app can run it: same "
        "python/torch/CUDA/NCCL/variables, reachable, a short all-reduce (docs/preflight.md)",
        default=False,
    )
    opts.add(
        "preflight_match",
        list,
        f"what every node must share (default: all): {';'.join(FIELDS)};env:NAME",
        check=check_match,
    )
    opts.add(
        "preflight_slow_factor",
        float,
        "a node whose own all-reduce bus bandwidth is this many times below the others' "
        f"fails the preflight (0: report only; default: {DEFAULT_SLOW_FACTOR:g} for NCCL, "
        "CPU/gloo figures only reported)",
        check=lambda v: None if v == 0 or v >= 1 else "must be 0 or >= 1",
    )
    opts.add(
        "preflight_timeout",
        float,
        "seconds the nodes have to start, meet and pass the preflight",
        default=DEFAULT_TIMEOUT,
        check=at_least(1),
    )
    if exclude_bad_nodes:
        opts.add(
            "preflight_exclude_bad_nodes",
            bool,
            "after a failed preflight, requeue the job without the nodes it named "
            "(--exclude; counts as a requeue)",
            default=False,
        )


@frozen
class PreflightOptions:
    """What a preflight checks: the fields that must match, the slow factor, the time limit."""

    match: tuple[str, ...] = FIELDS
    slow_factor: float | None = None  # None: DEFAULT_SLOW_FACTOR for NCCL, report-only for gloo
    timeout: float = DEFAULT_TIMEOUT

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, Any]) -> PreflightOptions | None:
        """The options a resolved cfg asks for (None: no preflight)."""
        if not cfg.get("preflight"):
            return None
        match = cfg.get("preflight_match") or FIELDS
        why = check_match(match)
        if why:
            raise UsageError(f"option 'preflight_match': {why}")
        factor, timeout = cfg.get("preflight_slow_factor"), cfg.get("preflight_timeout")
        return cls(
            tuple(match),
            None if factor is None else float(factor),
            DEFAULT_TIMEOUT if timeout is None else float(timeout),
        )

    @classmethod
    def from_flags(cls, values: Mapping[str, Any]) -> PreflightOptions | None:
        """The options the agent's --preflight* flags carry (None: no --preflight)."""
        if not values.get("preflight"):
            return None
        match = tuple(values.get("preflight_match") or ()) or FIELDS
        why = check_match(match)
        if why:
            raise UsageError(f"--preflight-match: {why}")
        factor = values.get("preflight_slow_factor")
        return cls(
            match, None if factor is None else float(factor), float(values["preflight_timeout"])
        )

    def flag_values(self) -> dict[str, Any]:
        """The agent flag values (agent/flags.py's destinations) that ask for this preflight."""
        return {
            "preflight": True,
            "preflight_match": () if self.match == FIELDS else self.match,
            "preflight_slow_factor": self.slow_factor,
            "preflight_timeout": self.timeout,
        }

    def matches(self, field: str) -> bool:
        """Whether the nodes must agree on field."""
        return field in self.match

    def extra_env(self) -> tuple[str, ...]:
        """The variables named as ``env:NAME``."""
        return tuple(m.split(":", 1)[1] for m in self.match if m.startswith("env:"))

    def slow_factor_for(self, backend: str) -> float:
        """The factor that judges this backend's figures (0: report only)."""
        if self.slow_factor is not None:
            return self.slow_factor
        return DEFAULT_SLOW_FACTOR if backend == "nccl" else 0.0
