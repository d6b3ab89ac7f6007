"""THE env contract: every ``TRAINLAUNCH_*`` variable lives here and nowhere else.

Two families:

* **rank settings** (:class:`RankSettings`): what the launcher injects into every rank of every
  app, identically on every backend, and what ``trainlaunch.rank`` reads back inside the rank:
  the telemetry export strategy, the seed, and the metrics path.
* **launcher settings**: variables read by the CLI in the launching shell (the store location,
  the default scheduler) and per-replica identity variables the backends set.

Precedence for launcher options (documented in docs/configuration.md):
command line > environment (``TRAINLAUNCH_*``) > project file > user file > built-in default.
This module imports nothing heavy: the rank library and the CLI both import it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from trainlaunch.errors import UsageError
from trainlaunch.values import frozen

# --- rank settings (injected into every rank) -------------------------------------------------
SEED = "TRAINLAUNCH_SEED"
EXPORT_STRATEGY = "TRAINLAUNCH_EXPORT_STRATEGY"
EXPORT_RANK = "TRAINLAUNCH_EXPORT_RANK"
EXPORT_SAMPLE_RATE = "TRAINLAUNCH_EXPORT_SAMPLE_RATE"
METRICS_PATH = "TRAINLAUNCH_METRICS_PATH"

# --- identity of the replica (set by every backend unless noted) ------------------------------
APP_ID = "TRAINLAUNCH_APP_ID"
HANDLE = "TRAINLAUNCH_HANDLE"
ROLE_NAME = "TRAINLAUNCH_ROLE"
REPLICA_ID = "TRAINLAUNCH_REPLICA_ID"
NUM_REPLICAS = "TRAINLAUNCH_NUM_REPLICAS"
RANK0_HOST = "TRAINLAUNCH_RANK0_HOST"  # the ${rank0_env} of every backend
RDZV_PORT = "TRAINLAUNCH_RDZV_PORT"  # port rank 0 listens on for multi-node static rendezvous
# Which attempt this is (0 on the first run): restarts after failures plus requeues after a
# preemption or time limit. Set by the local and Slurm backends, and on Kubernetes by the node
# agent from the two counts below (the rank library adds them up itself where no agent runs).
RESTART_COUNT = "TRAINLAUNCH_RESTART_COUNT"
# Kubernetes (backoffLimitPerIndex, 1.29+): the pod's failure counts for its index, from the
# Job controller's annotations through the downward API ('' when the cluster set none).
INDEX_FAILURES = "TRAINLAUNCH_INDEX_FAILURES"  # job-index-failure-count: failures
INDEX_REQUEUES = "TRAINLAUNCH_INDEX_REQUEUES"  # job-index-ignored-failure-count: requeues
MAX_REQUEUES = "TRAINLAUNCH_MAX_REQUEUES"  # Kubernetes: the limit the pod's agent enforces
# local and Slurm (not Kubernetes): where a replica (node agent) keeps its files
REPLICA_LOG_DIR = "TRAINLAUNCH_REPLICA_LOG_DIR"
USER_UMASK = "TRAINLAUNCH_USER_UMASK"  # slurm: the submitter's umask, restored for the app itself

# --- preemption (docs/preemption.md) --------------------------------------------------------
# A rank that saved its state after a warning exits with this code to ask for a requeue
# (sysexits' EX_TEMPFAIL: "try again later"); every backend counts it apart from failures.
REQUEUE_EXIT_CODE = 75
# Kubernetes: a pod started after its replica's last requeue exits with this code at once; the
# Job's podFailurePolicy turns it into FailJob ("requeues exhausted", docs/kubernetes.md).
REQUEUES_EXHAUSTED_EXIT_CODE = 76

# --- preflight (docs/preflight.md) ---------------------------------------------------------
# A node agent whose preflight refused the job exits with this code before any rank started
# (sysexits' EX_CONFIG: "something was found in an unconfigured or misconfigured state").
PREFLIGHT_EXIT_CODE = 78
PREFLIGHT_STORE_PREFIX = "trainlaunch/preflight/"  # its keys in node 0's store (ranks use others)

# --- launcher side ----------------------------------------------------------------------------
# `trainlaunch torchrun` in the foreground with its stdout or stderr on a terminal:
# ``PID:TICKS:OUT:ERR`` (the command's pid and start ticks, each stream's terminal or nothing);
# the node agent gives each rank a pty per such stream and shows it there live (agent/terminal.py)
TTY = "TRAINLAUNCH_TTY"
HOME = "TRAINLAUNCH_HOME"  # the local app store, absolute (default: per-user state dir)
SCHEDULER = "TRAINLAUNCH_SCHEDULER"  # default scheduler for `run`
CONFIG = "TRAINLAUNCH_CONFIG"  # explicit config file ('' = none)
DEBUG = "TRAINLAUNCH_DEBUG"  # show tracebacks at the error boundary
GPU_COUNT = (
    "TRAINLAUNCH_GPU_COUNT"  # override the visible-GPU count (tests; machines w/o nvidia-smi)
)

# --- hangs and stack dumps (docs/hangs.md) ---------------------------------------------------
# per-rank file ({rank} filled in by the rank) that trainlaunch.rank.heartbeat() touches; the
# local supervisor's hang watchdog and `status` read its modification time as progress
HEARTBEAT_PATH = "TRAINLAUNCH_HEARTBEAT_PATH"
# "1": the node agent turns torch's Flight Recorder on in every rank (set by the backends with
# hang_timeout; a user may set it too) so hangs name the collective the ranks wait in
FLIGHT_RECORDER = "TRAINLAUNCH_FLIGHT_RECORDER"
# per rank, set by the node agent: the unix socket on which the rank serves torch's worker
# handlers (its Flight Recorder dump); trainlaunch's torch plugin (torch_plugin.py) starts it
RECORDER_SOCKET = "TRAINLAUNCH_RECORDER_SOCKET"
RECORDER_BUFFER = 2000  # TORCH_FR_BUFFER_SIZE the agent sets when the user set none

BUILTIN_STRATEGIES: frozenset[str] = frozenset(
    {"all_ranks", "single_rank", "sampled", "first_rank_per_node"}
)
DEFAULT_STRATEGY = "all_ranks"
DEFAULT_SEED = 95050  # the rank library's seed when nothing was injected (seed 002's default)
DEFAULT_METRICS_FILE = "rank{rank}.jsonl"  # relative name inside a metrics directory
# Beside each metrics file, the names of its metrics: one JSON string per line, a ``null`` line
# when they are too many to list. Written by MetricLogger before any record that uses a name,
# so `trainlaunch metrics` can read a long file from its end and stop once every name is seen.
METRIC_NAMES_SUFFIX = ".names"

# --- secrets in an app's environment ----------------------------------------------------------
# One rule for every place that must keep a variable's value to itself: masked wherever
# trainlaunch prints it, kept out of argv and of Kubernetes annotations (a Secret holds it).
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|KEY", re.I)
SECRET_MASK = "********"  # what is shown (and recorded) in place of a secret value
# A value that is a credential whatever its variable is called (GITHUB_PAT, DATABASE_URL): a
# URL with a password, or a token with a well-known prefix (GitHub, GitLab, Slack, OpenAI,
# Hugging Face, npm, PyPI, Google, AWS access key ids).
SECRET_VALUE = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@"
    r"|(?<![A-Za-z0-9])(?:gh[pousr]_|github_pat_|glpat-|xox[abeoprs]-|sk-|hf_|npm_|pypi-|AIza|"
    r"ya29\.)[A-Za-z0-9_-]{16,}"
    r"|(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"
)


def is_secret(name: str, value: str = "") -> bool:
    """Whether env variable ``name`` (set to ``value``) holds a secret: names like *TOKEN*,
    *SECRET*, *PASSWORD*, *KEY* (anywhere in the name, any case), or a value that looks like
    a credential (SECRET_VALUE: a URL with a password, a known token prefix)."""
    return bool(SECRET_NAME.search(name) or (value and SECRET_VALUE.search(value)))


def is_builtin_namespace(name: str) -> bool:
    """A strategy name without ``.`` or ``:`` belongs to the built-in namespace.

    Custom strategies registered inside user code use a qualified name such as
    ``myproj:every_other``; the launcher passes those through and the rank checks them.
    """
    return "." not in name and ":" not in name


@frozen
class RankSettings:
    """The three settings every rank receives (seed, export strategy, metrics path)."""

    seed: int | None = None
    export_strategy: str = DEFAULT_STRATEGY
    export_rank: int = 0
    export_sample_rate: float = 1.0
    metrics_path: str | None = None

    def __post_init__(self) -> None:
        validate(self)

    def to_env(self) -> dict[str, str]:
        """Render as environment variables (unset values are omitted)."""
        env = {
            EXPORT_STRATEGY: self.export_strategy,
            EXPORT_RANK: str(self.export_rank),
            EXPORT_SAMPLE_RATE: repr(float(self.export_sample_rate)),
        }
        if self.seed is not None:
            env[SEED] = str(self.seed)
        if self.metrics_path:
            env[METRICS_PATH] = self.metrics_path
        return env

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able view, as recorded in the app store."""
        import dataclasses

        return dataclasses.asdict(self)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RankSettings:
        """Read the injected settings; missing variables take the defaults above."""
        env = os.environ if environ is None else environ
        return cls(
            seed=_from_env(env, SEED, None),
            export_strategy=env.get(EXPORT_STRATEGY) or DEFAULT_STRATEGY,
            export_rank=_from_env(env, EXPORT_RANK, 0) or 0,
            export_sample_rate=_from_env(env, EXPORT_SAMPLE_RATE, 1.0),
            metrics_path=env.get(METRICS_PATH) or None,
        )


def validate(s: RankSettings) -> None:
    """Raise UsageError for a value no rank could use."""
    if s.seed is not None and (isinstance(s.seed, bool) or not isinstance(s.seed, int)):
        raise UsageError(f"seed must be an integer, got {s.seed!r}")
    if s.seed is not None and s.seed < 0:
        raise UsageError(f"seed must be >= 0, got {s.seed}")
    if s.seed is not None and s.seed >= 2**64:
        raise UsageError(f"seed must be < 2**64, got {s.seed}")
    if not s.export_strategy:
        raise UsageError("export strategy must not be empty")
    if is_builtin_namespace(s.export_strategy) and s.export_strategy not in BUILTIN_STRATEGIES:
        raise UsageError(
            f"unknown export strategy {s.export_strategy!r}; "
            f"built-ins: {', '.join(sorted(BUILTIN_STRATEGIES))}",
            hint="custom strategies registered in your code need a qualified name, "
            "e.g. 'myproj:every_other'",
        )
    if isinstance(s.export_rank, bool) or not isinstance(s.export_rank, int) or s.export_rank < -1:
        raise UsageError(f"export rank must be an integer >= -1, got {s.export_rank!r}")
    rate = s.export_sample_rate
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or math.isnan(rate):
        raise UsageError(f"export sample rate must be a number in [0, 1], got {rate!r}")
    if not 0.0 <= float(rate) <= 1.0:
        raise UsageError(f"export sample rate must be in [0, 1], got {rate}")


_ENV_TYPES: dict[str, type] = {SEED: int, EXPORT_RANK: int, EXPORT_SAMPLE_RATE: float}


def parse_env_value(name: str, raw: str) -> Any:
    """One parser for a rank setting's variable (the launcher's config and from_env use it)."""
    kind = _ENV_TYPES.get(name, str)
    if kind is str:
        return raw
    try:
        return kind(raw.strip())
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise UsageError(f"{name} must be {what}, got {raw!r}") from None


def _from_env(env: Mapping[str, str], name: str, default: Any) -> Any:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    return parse_env_value(name, raw)


def check_strategy_module(strategy: str, search_path: Sequence[str]) -> None:
    """UsageError unless a qualified strategy's module (``pkg`` of ``pkg:name``) can be found.

    Only looks the top-level package up (importlib's path finder; nothing is imported, so a
    package that needs torch costs nothing here). Built-in names are not modules.
    """
    if is_builtin_namespace(strategy):
        return
    top = strategy.split(":", 1)[0].split(".", 1)[0]
    import importlib.machinery
    import sys

    paths = [p for p in search_path if p] + sys.path
    found = top.isidentifier() and (
        top in sys.builtin_module_names or importlib.machinery.PathFinder.find_spec(top, paths)
    )
    if not found:
        raise UsageError(
            f"export strategy {strategy!r}: no module {top!r} for the ranks to import",
            hint="name a custom strategy after the module that registers it "
            "(e.g. 'train:even' registered in train.py), importable from the working directory",
        )


def inject(app: Any, rank_settings: RankSettings, handle_prefix: str) -> Any:
    """A new AppDef whose every role carries the rank settings and its identity variables.

    ``handle_prefix`` is ``scheduler://session/``; the app id is the ``${app_id}`` macro,
    which each scheduler substitutes per replica. The settings are recorded in the app's
    metadata (key ``trainlaunch``) so ``describe`` can reproduce the run.
    """
    env = rank_settings.to_env()
    env[APP_ID] = "${app_id}"
    env[HANDLE] = handle_prefix + "${app_id}"

    def with_env(role: Any) -> Any:
        merged = dict(role.env)
        merged.update(env)
        merged[ROLE_NAME] = role.name
        merged[REPLICA_ID] = "${replica_id}"
        merged[NUM_REPLICAS] = str(role.num_replicas)
        return role.replace(env=merged)

    meta = dict(app.metadata)
    meta["trainlaunch"] = {**dict(meta.get("trainlaunch") or {}), **rank_settings.to_dict()}
    return app.map_roles(with_env).replace(metadata=meta)
