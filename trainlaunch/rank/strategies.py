"""Export-strategy registry: which ranks export telemetry (API of NeMo Lens' ``strategies``).

A strategy is a callable ``(settings, rank, world_size) -> bool`` where ``settings`` is the
:class:`~trainlaunch.settings.RankSettings` the launcher injected. Four built-ins are registered
at import; user code registers its own under a *qualified* name (``"myproj:every_other"``), the
only kind of custom name :class:`RankSettings` accepts from ``TRAINLAUNCH_EXPORT_STRATEGY``.

``sampled`` selects an exact, reproducible set of ranks:

* every rank gets a key, block ``rank`` of ``SHAKE-256(seed)`` (a stable digest: the same on
  every process, machine and Python version, unlike the salted built-in ``hash()``);
* ranks are ordered by key (rank breaks ties) and the first ``k`` export, where
  ``k = floor(rate * world_size + 0.5)``, at least 1 when ``rate > 0``, 0 when ``rate == 0``.

So the count is within 0.5 of ``rate * world_size`` (or exactly 1 when that product is below
0.5 and the rate is positive), a higher rate selects a superset of the ranks a lower rate
selects, and the seed (injected identically into every rank) varies *which* ranks export
from job to job. Upstream's per-rank Bernoulli draw selects nobody at rate 0.01 below 56 ranks.

Imports nothing but the standard library and :mod:`trainlaunch.settings`.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections.abc import Callable

from trainlaunch.settings import (
    BUILTIN_STRATEGIES,
    DEFAULT_SEED,
    RankSettings,
    is_builtin_namespace,
)

__all__ = [
    "BUILTIN_STRATEGIES",
    "ExportStrategy",
    "get_export_strategy",
    "local_rank_from_env",
    "register_export_strategy",
    "registered_strategies",
    "sampled_ranks",
    "should_export",
    "unregister_export_strategy",
]

ExportStrategy = Callable[[RankSettings, int, int], bool]

# torchrun sets LOCAL_RANK; plain `srun` and `mpirun` only set their own names.
_LOCAL_RANK_VARS = ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK")


def _check_position(rank: int, world_size: int) -> None:
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an integer >= 1, got {world_size!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be an integer in [0, {world_size}), got {rank!r}")


def _all_ranks(settings: RankSettings, rank: int, world_size: int) -> bool:
    """Built-in: every rank exports."""
    return True


def _single_rank(settings: RankSettings, rank: int, world_size: int) -> bool:
    """Built-in: only ``settings.export_rank`` exports (-1 means the last rank)."""
    target = settings.export_rank if settings.export_rank >= 0 else world_size - 1
    if target >= world_size:
        # Upstream silently exports nothing here; a typo should not cost a run's telemetry.
        raise ValueError(
            f"export rank {settings.export_rank} is out of range for world size {world_size}"
        )
    return rank == target


@functools.lru_cache(maxsize=16)
def _rank_order(world_size: int, seed: int) -> tuple[int, ...]:
    # One extendable-output hash gives every rank its key (block r of the stream), so ordering
    # W ranks costs one hash call, and rank r's key does not depend on the world size.
    stream = hashlib.shake_256(b"trainlaunch.sampled:" + seed.to_bytes(8, "big"))
    blocks = stream.digest(8 * world_size)
    return tuple(sorted(range(world_size), key=lambda r: (blocks[8 * r : 8 * r + 8], r)))


@functools.lru_cache(maxsize=64)
def sampled_ranks(rate: float, world_size: int, seed: int = DEFAULT_SEED) -> frozenset[int]:
    """The ranks the ``sampled`` strategy selects (see the module docstring for the rule)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"sample rate must be in [0, 1], got {rate!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size!r}")
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must be in [0, 2**64), got {seed!r}")
    if rate == 0.0:
        return frozenset()
    count = max(1, min(world_size, int(rate * world_size + 0.5)))
    if count == world_size:
        return frozenset(range(world_size))
    return frozenset(_rank_order(world_size, seed)[:count])


def _sampled(settings: RankSettings, rank: int, world_size: int) -> bool:
    """Built-in: a reproducible ``round(rate * world_size)`` ranks export (>= 1 if rate > 0)."""
    seed = DEFAULT_SEED if settings.seed is None else settings.seed
    return rank in sampled_ranks(float(settings.export_sample_rate), world_size, seed)


def local_rank_from_env() -> int:
    """This process's rank on its node: LOCAL_RANK, SLURM_LOCALID, OMPI's, else 0."""
    for name in _LOCAL_RANK_VARS:
        raw = os.environ.get(name, "").strip()
        if raw:
            try:
                return int(raw)
            except ValueError:
                raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    return 0  # nothing set: a single-node, single-process run


def _first_rank_per_node(settings: RankSettings, rank: int, world_size: int) -> bool:
    """Built-in: the first local rank on each node exports."""
    return local_rank_from_env() == 0


_BUILTINS: dict[str, ExportStrategy] = {
    "all_ranks": _all_ranks,
    "single_rank": _single_rank,
    "sampled": _sampled,
    "first_rank_per_node": _first_rank_per_node,
}
if frozenset(_BUILTINS) != BUILTIN_STRATEGIES:  # the env contract and this table must agree
    raise RuntimeError("trainlaunch.settings.BUILTIN_STRATEGIES disagrees with the built-ins")

_REGISTRY: dict[str, ExportStrategy] = dict(_BUILTINS)
_REGISTRY_LOCK = threading.Lock()


def register_export_strategy(
    name: str, strategy: ExportStrategy, allow_override: bool = False
) -> None:
    """Register ``strategy`` under ``name``; an existing name needs ``allow_override=True``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"strategy name must be a non-empty string, got {name!r}")
    if not callable(strategy):
        raise ValueError(f"strategy {name!r} must be callable, got {type(strategy).__name__}")
    if is_builtin_namespace(name) and name not in BUILTIN_STRATEGIES:
        # RankSettings rejects such a name, so it could never be selected from the env.
        raise ValueError(
            f"custom strategy name {name!r} must be qualified, e.g. 'myproj:{name}' "
            "(unqualified names are reserved for the built-ins)"
        )
    with _REGISTRY_LOCK:
        if name in _REGISTRY and not allow_override:
            kind = "built-in" if name in BUILTIN_STRATEGIES else "registered"
            raise ValueError(
                f"export strategy {name!r} is already {kind}; pass allow_override=True to replace it"
            )
        _REGISTRY[name] = strategy


def unregister_export_strategy(name: str) -> None:
    """Remove a custom strategy; for an overridden built-in, restore the original."""
    with _REGISTRY_LOCK:
        if name in _BUILTINS:
            if _REGISTRY.get(name) is _BUILTINS[name]:
                raise ValueError(f"export strategy {name!r} is built-in and cannot be removed")
            _REGISTRY[name] = _BUILTINS[name]  # upstream leaves no way back after an override
            return
        if name not in _REGISTRY:
            raise ValueError(f"unknown export strategy {name!r}; registered: {sorted(_REGISTRY)}")
        del _REGISTRY[name]


def get_export_strategy(name: str) -> ExportStrategy:
    """Look up a registered strategy; ValueError lists the registered names."""
    with _REGISTRY_LOCK:
        strategy = _REGISTRY.get(name)
        if strategy is None:
            raise ValueError(
                f"unknown export strategy {name!r}; registered strategies: {sorted(_REGISTRY)}"
            )
        return strategy


def registered_strategies() -> list[str]:
    """Sorted names of every registered strategy (built-ins and custom)."""
    with _REGISTRY_LOCK:
        return sorted(_REGISTRY)


def should_export(settings: RankSettings, rank: int, world_size: int) -> bool:
    """Whether this rank exports under ``settings.export_strategy``."""
    _check_position(rank, world_size)
    return bool(get_export_strategy(settings.export_strategy)(settings, rank, world_size))
