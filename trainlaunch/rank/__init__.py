"""The in-rank library: seeding, export strategies and metric logging inside a training rank.

``setup()`` is the one call a training script makes::

    import trainlaunch.rank

    logger = trainlaunch.rank.setup()        # seeds this rank, picks its metrics file
    logger.log(trainlaunch.rank.MetricsSample(step, epoch, {"loss": loss}))
    logger.close()

It works the same under ``trainlaunch run``, plain ``torchrun`` and plain ``python``; see
docs/rank-library.md for the defaults. Importing this package imports neither torch nor numpy.
"""

from __future__ import annotations

import dataclasses
import os

from trainlaunch.rank._heartbeat import heartbeat
from trainlaunch.rank.metrics import (
    DEFAULT_BUFFER_SIZE,
    MetricLogger,
    MetricLoggerDist,
    MetricsSample,
    NullMetricLogger,
    build_metric_logger,
    stack_and_move_tensor_metrics_to_cpu,
)
from trainlaunch.rank.rng import (
    RNGState,
    ScopedRNG,
    StatefulRNG,
    derive_seed,
    get_rng_state,
    init_all_rng,
    set_rng_state,
)
from trainlaunch.rank.strategies import (
    BUILTIN_STRATEGIES,
    ExportStrategy,
    get_export_strategy,
    register_export_strategy,
    registered_strategies,
    should_export,
    unregister_export_strategy,
)
from trainlaunch.settings import DEFAULT_METRICS_FILE, DEFAULT_SEED, RankSettings

__all__ = [
    "BUILTIN_STRATEGIES",
    "DEFAULT_BUFFER_SIZE",
    "DEFAULT_METRICS_DIR",
    "ExportStrategy",
    "MetricLogger",
    "MetricLoggerDist",
    "MetricsSample",
    "NullMetricLogger",
    "RNGState",
    "RankInfo",
    "ScopedRNG",
    "StatefulRNG",
    "build_metric_logger",
    "derive_seed",
    "get_export_strategy",
    "get_rng_state",
    "heartbeat",
    "init_all_rng",
    "rank_info",
    "register_export_strategy",
    "registered_strategies",
    "resolve_metrics_path",
    "set_rng_state",
    "setup",
    "should_export",
    "stack_and_move_tensor_metrics_to_cpu",
    "unregister_export_strategy",
]

DEFAULT_METRICS_DIR = "metrics"  # relative to the working directory when nothing is injected


@dataclasses.dataclass(frozen=True)
class RankInfo:
    """Where this process sits in the job (torchrun's RANK, WORLD_SIZE, LOCAL_RANK)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None


def rank_info() -> RankInfo:
    """This process's rank from the environment (defaults 0, 1, 0 under plain ``python``)."""
    info = RankInfo(_env_int("RANK", 0), _env_int("WORLD_SIZE", 1), _env_int("LOCAL_RANK", 0))
    if info.world_size < 1 or not 0 <= info.rank < info.world_size or info.local_rank < 0:
        raise ValueError(
            f"inconsistent rank environment: RANK={info.rank} WORLD_SIZE={info.world_size} "
            f"LOCAL_RANK={info.local_rank}"
        )
    return info


def resolve_metrics_path(template: str | None, rank: int) -> str:
    """The metrics file of ``rank``: ``{rank}`` expanded, directories get ``rank{rank}.jsonl``.

    ``None`` means ``./metrics/rank{rank}.jsonl``. A path that ends with ``/`` or names an
    existing directory gets :data:`~trainlaunch.settings.DEFAULT_METRICS_FILE` inside it. A file
    path without ``{rank}`` is used as is by every exporting rank (each line carries ``rank``).
    """
    path = os.path.expanduser(template) if template else DEFAULT_METRICS_DIR + os.sep
    if path.endswith(("/", os.sep)) or os.path.isdir(path.replace("{rank}", str(rank))):
        path = os.path.join(path, DEFAULT_METRICS_FILE)
    # str.replace, not str.format: other braces in a path are not ours to interpret.
    return path.replace("{rank}", str(rank))


def setup(
    *, ranked: bool = True, buffer_size: int = DEFAULT_BUFFER_SIZE, flush: bool = False
) -> MetricLogger | NullMetricLogger:
    """Seed this rank and return its metric logger (a no-op one where nothing is exported).

    Reads the injected :class:`~trainlaunch.settings.RankSettings`. The seed is
    ``TRAINLAUNCH_SEED`` (default 95050); with ``ranked`` (the default) each rank seeds
    ``derive_seed(seed, rank)`` so that dropout and augmentation differ across ranks.
    """
    settings = RankSettings.from_env()
    info = rank_info()
    seed = DEFAULT_SEED if settings.seed is None else settings.seed
    init_all_rng(derive_seed(seed, info.rank) if ranked else seed)
    if not should_export(settings, info.rank, info.world_size):
        return NullMetricLogger()
    path = resolve_metrics_path(settings.metrics_path, info.rank)
    return MetricLogger(path, flush=flush, buffer_size=buffer_size, rank_field=info.rank)
