"""The nouns: AppDef, Role, Resource, RetryPolicy, AppState, AppStatus, runopts, macros, handles.

Everything here is a frozen value validated when it is built; nothing does I/O. Dryrun,
injection and macro substitution return new objects (TorchX shipped stale env because its
dryrun mutated the caller's AppDef).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from trainlaunch.errors import UsageError
from trainlaunch.values import frozen

# AppDef.metadata key of the run record: {component, args, cwd, code[, rerun_of]} (rerun.py)
RUN_RECORD_KEY = "trainlaunch_run"

MAX_REPLICAS = 100_000  # no backend runs more (a Kubernetes Indexed Job's completions limit)
NODE_AGENT = "trainlaunch.agent"  # the module every node-agent replica runs
NODE_AGENT_ARGS = ("-m", NODE_AGENT)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def _frozen_map(value: Mapping[str, Any] | None, what: str) -> Mapping[str, Any]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise UsageError(f"{what} must be a mapping, got {type(value).__name__}")
    return MappingProxyType(dict(value))


def check_name(name: str, what: str) -> None:
    """Names become file, job and DNS names: letters, digits, '_', '.', '-' only."""
    if not isinstance(name, str) or not NAME_RE.match(name) or name in (".", ".."):
        raise UsageError(
            f"invalid {what} name {name!r}: use 1-63 letters, digits, '_', '.', '-' "
            "starting with a letter or digit"
        )


class AppState(enum.IntEnum):
    """Lifecycle state of an app or a replica."""

    UNSUBMITTED = 0
    SUBMITTED = 1
    PENDING = 2
    RUNNING = 3
    SUCCEEDED = 4
    FAILED = 5
    CANCELLED = 6
    UNKNOWN = 7

    @property
    def is_terminal(self) -> bool:
        """True for SUCCEEDED, FAILED and CANCELLED."""
        return self in _TERMINAL


_TERMINAL = frozenset({AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED})
ReplicaState = AppState


def is_terminal(state: AppState) -> bool:
    """True when the state can no longer change."""
    return AppState(state).is_terminal


class RetryPolicy(str, enum.Enum):
    """What a failure restarts: the whole app, the failed replica, or the failed role."""

    APPLICATION = "APPLICATION"
    REPLICA = "REPLICA"
    ROLE = "ROLE"


@frozen
class Resource:
    """What one replica asks for."""

    cpu: int = 1
    gpu: int = 0
    # 0: not set, the cluster's default applies (Slurm DefMemPerNode, a Kubernetes LimitRange);
    # one default for every component (a fixed 1 GiB was too little for real training)
    memMB: int = 0  # noqa: N815 (TorchX's spelling, kept for familiarity)
    capabilities: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for field in ("cpu", "gpu", "memMB"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageError(f"resource {field} must be an integer >= 0, got {value!r}")
        object.__setattr__(self, "capabilities", _frozen_map(self.capabilities, "capabilities"))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "cpu": self.cpu,
            "gpu": self.gpu,
            "memMB": self.memMB,
            "capabilities": dict(self.capabilities),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Resource:
        """Inverse of to_dict."""
        return cls(
            cpu=d.get("cpu", 1),
            gpu=d.get("gpu", 0),
            memMB=d.get("memMB", 0),
            capabilities=d.get("capabilities") or {},
        )


# Role.metadata key: the program a role runs, for backends that can check it before submitting
# (the local backend does): {"path": "train.py"} relative to the replica's working directory,
# or {"command": "prog"} looked up on PATH. On a cluster or in an image it cannot be checked.
PROGRAM = "trainlaunch.program"


@frozen
class Role:
    """A set of identical replicas running one entrypoint."""

    name: str
    entrypoint: str
    args: tuple[str, ...] = ()
    image: str = ""
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    num_replicas: int = 1
    min_replicas: int | None = None
    max_retries: int = 0
    retry_policy: RetryPolicy = RetryPolicy.APPLICATION
    resource: Resource = dataclasses.field(default_factory=Resource)
    port_map: Mapping[str, int] = dataclasses.field(default_factory=dict)
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    # each replica is trainlaunch's node agent (args = NODE_AGENT_ARGS + its flags): backends
    # read this instead of guessing from argv (per-rank dryrun plan, agent restarts)
    node_agent: bool = False

    def __post_init__(self) -> None:
        check_name(self.name, "role")
        if not isinstance(self.entrypoint, str) or not self.entrypoint:
            raise UsageError(f"role {self.name!r}: entrypoint must be a non-empty string")
        args = tuple(self.args)
        for a in args:
            if not isinstance(a, str):
                raise UsageError(f"role {self.name!r}: every arg must be a string, got {a!r}")
        object.__setattr__(self, "args", args)
        if self.node_agent and args[: len(NODE_AGENT_ARGS)] != NODE_AGENT_ARGS:
            raise UsageError(
                f"role {self.name!r}: a node_agent role's args start with -m {NODE_AGENT}"
            )
        env = _frozen_map(self.env, "env")
        for k, v in env.items():
            if not isinstance(k, str) or not k or "=" in k or "\0" in k:
                raise UsageError(f"role {self.name!r}: invalid env name {k!r}")
            if not isinstance(v, str) or "\0" in v:
                raise UsageError(f"role {self.name!r}: env {k} must be a string without NUL")
        object.__setattr__(self, "env", env)
        for field in ("num_replicas", "max_retries"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise UsageError(f"role {self.name!r}: {field} must be an integer")
        if self.num_replicas < 1:
            raise UsageError(f"role {self.name!r}: num_replicas must be >= 1")
        if self.num_replicas > MAX_REPLICAS:
            raise UsageError(
                f"role {self.name!r}: {self.num_replicas} replicas is more than any backend "
                f"runs (at most {MAX_REPLICAS})"
            )
        if self.max_retries < 0:
            raise UsageError(f"role {self.name!r}: max_retries must be >= 0")
        if self.min_replicas is not None and not 1 <= self.min_replicas <= self.num_replicas:
            raise UsageError(f"role {self.name!r}: min_replicas must be in 1..num_replicas")
        object.__setattr__(self, "retry_policy", RetryPolicy(self.retry_policy))
        if not isinstance(self.resource, Resource):
            raise UsageError(f"role {self.name!r}: resource must be a Resource")
        object.__setattr__(self, "port_map", _frozen_map(self.port_map, "port_map"))
        object.__setattr__(self, "metadata", _frozen_map(self.metadata, "metadata"))

    def replace(self, **changes: Any) -> Role:
        """A new Role with some fields changed."""
        return dataclasses.replace(self, **changes)

    @property
    def agent_args(self) -> tuple[str, ...] | None:
        """The node agent's own arguments (after ``-m trainlaunch.agent``), if it is one."""
        return self.args[len(NODE_AGENT_ARGS) :] if self.node_agent else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (node_agent only when set, so other records keep their shape)."""
        return {
            "name": self.name,
            "entrypoint": self.entrypoint,
            "args": list(self.args),
            "image": self.image,
            "env": dict(self.env),
            "num_replicas": self.num_replicas,
            "min_replicas": self.min_replicas,
            "max_retries": self.max_retries,
            "retry_policy": self.retry_policy.value,
            "resource": self.resource.to_dict(),
            "port_map": dict(self.port_map),
            "metadata": dict(self.metadata),
            **({"node_agent": True} if self.node_agent else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Role:
        """Inverse of to_dict."""
        return cls(
            name=d["name"],
            entrypoint=d["entrypoint"],
            args=tuple(d.get("args", ())),
            image=d.get("image", ""),
            env=d.get("env") or {},
            num_replicas=d.get("num_replicas", 1),
            min_replicas=d.get("min_replicas"),
            max_retries=d.get("max_retries", 0),
            retry_policy=RetryPolicy(d.get("retry_policy", "APPLICATION")),
            resource=Resource.from_dict(d.get("resource") or {}),
            port_map=d.get("port_map") or {},
            metadata=d.get("metadata") or {},
            node_agent=d.get("node_agent") is True,
        )


@frozen
class AppDef:
    """An application: a name and one or more roles."""

    name: str
    roles: tuple[Role, ...]
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        check_name(self.name, "app")
        roles = tuple(self.roles)
        if not roles:
            raise UsageError(f"app {self.name!r} has no roles")
        seen: set[str] = set()
        for r in roles:
            if not isinstance(r, Role):
                raise UsageError(f"app {self.name!r}: roles must be Role values, got {r!r}")
            if r.name in seen:
                raise UsageError(f"app {self.name!r}: duplicate role name {r.name!r}")
            seen.add(r.name)
        object.__setattr__(self, "roles", roles)
        object.__setattr__(self, "metadata", _frozen_map(self.metadata, "metadata"))

    def replace(self, **changes: Any) -> AppDef:
        """A new AppDef with some fields changed."""
        return dataclasses.replace(self, **changes)

    def check_size(self, max_replicas: int, backend: str) -> None:
        """UsageError if the app has more replicas than the backend can run (before planning)."""
        total = sum(r.num_replicas for r in self.roles)
        if total > max_replicas:
            raise UsageError(
                f"the app has {total} replicas; the {backend} backend runs at most {max_replicas}",
                hint="lower --nnodes/--num-replicas",
            )

    def map_roles(self, fn: Callable[[Role], Role]) -> AppDef:
        """A new AppDef with fn applied to every role."""
        return self.replace(roles=tuple(fn(r) for r in self.roles))

    def role(self, name: str) -> Role:
        """The role with that name (UsageError lists the names otherwise)."""
        for r in self.roles:
            if r.name == name:
                return r
        raise UsageError(
            f"app has no role {name!r}; roles: {', '.join(r.name for r in self.roles)}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "name": self.name,
            "roles": [r.to_dict() for r in self.roles],
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AppDef:
        """Inverse of to_dict."""
        return cls(
            name=d["name"],
            roles=tuple(Role.from_dict(r) for r in d["roles"]),
            metadata=d.get("metadata") or {},
        )


SLOT_GROUP = "trainlaunch.slot_group"  # AppDef.metadata key of the app's SlotGroup


@frozen
class SlotGroup:
    """At most ``size`` apps of the group ``name`` run at once; the others wait as PENDING.

    Set on an AppDef with :meth:`tag` (a sweep's ``--max-parallel`` does); a backend that
    declares ``slot_groups`` honours it (schedulers/api.py Capabilities).
    """

    name: str
    size: int

    def __post_init__(self) -> None:
        check_name(self.name, "slot group")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise UsageError(f"slot group {self.name!r}: size must be >= 1, got {self.size!r}")

    def tag(self, app: AppDef) -> AppDef:
        """A new AppDef in this group."""
        return app.replace(
            metadata={**app.metadata, SLOT_GROUP: {"name": self.name, "size": self.size}}
        )

    @classmethod
    def of(cls, app: AppDef) -> SlotGroup | None:
        """The group an AppDef is in, if any."""
        tag = app.metadata.get(SLOT_GROUP)
        if not isinstance(tag, Mapping):
            return None
        return cls(str(tag.get("name")), tag.get("size"))  # type: ignore[arg-type]


_MACRO_RE = re.compile(r"\$\{(img_root|app_id|replica_id|rank0_env)\}")


class macros:  # noqa: N801 (TorchX's spelling)
    """Placeholders substituted per replica by every scheduler."""

    img_root = "${img_root}"
    app_id = "${app_id}"
    replica_id = "${replica_id}"
    rank0_env = "${rank0_env}"

    @frozen
    class Values:
        """The values a scheduler substitutes for one replica."""

        img_root: str
        app_id: str
        replica_id: str
        rank0_env: str

        def substitute(self, text: str) -> str:
            """Replace the four macros in text; everything else (``$$``, ``${x}``) is kept."""
            if "${" not in text:
                return text
            values = dataclasses.asdict(self)
            return _MACRO_RE.sub(lambda m: values[m.group(1)], text)

        def apply(self, role: Role) -> Role:
            """A new Role with macros replaced in args and env values."""
            return role.replace(
                args=tuple(self.substitute(a) for a in role.args),
                env={k: self.substitute(v) for k, v in role.env.items()},
            )


# --- status -------------------------------------------------------------------------------------


@frozen
class ReplicaStatus:
    """The state of one replica (one process, node or pod)."""

    id: int
    state: AppState
    role: str
    hostname: str = ""
    exit_code: int | None = None
    signal: str | None = None  # e.g. "SIGKILL" when killed by a signal
    restarts: int = 0
    message: str = ""  # the root cause when failed (traceback or stderr tail)
    pid: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        d = dataclasses.asdict(self)
        d["state"] = self.state.name
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReplicaStatus:
        """Inverse of to_dict."""
        kw = {f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d}
        kw["state"] = AppState[d["state"]] if isinstance(d["state"], str) else AppState(d["state"])
        return cls(**kw)


@frozen
class RoleStatus:
    """The replicas of one role."""

    role: str
    replicas: tuple[ReplicaStatus, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"role": self.role, "replicas": [r.to_dict() for r in self.replicas]}


def _ended_with(state: AppState, replicas: Iterable[ReplicaStatus]) -> int | None:
    if state == AppState.SUCCEEDED:
        return 0
    codes = [r.exit_code for r in replicas if r.exit_code is not None]
    return next((c for c in codes if c != 0), codes[0] if codes else None)


@frozen
class Attempt:
    """One run of the whole app: why it ended (requeues and restarts start new attempts)."""

    attempt: int  # 0 for the first run
    reason: str = ""  # why it ended: preempted, time limit, failed, succeeded, ... ('' running)
    start: float | None = None  # unix times; None when unknown
    end: float | None = None
    exit_code: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Attempt:
        """Inverse of to_dict (a damaged field reads as unknown)."""

        def num(key: str) -> float | None:
            v = d.get(key)
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        code = d.get("exit_code")
        attempt = d.get("attempt")
        return cls(
            attempt=attempt if isinstance(attempt, int) else 0,
            reason=str(d.get("reason") or ""),
            start=num("start"),
            end=num("end"),
            exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        )


@frozen
class AppStatus:
    """The state of an app as a scheduler reports it."""

    state: AppState
    num_restarts: int = 0
    msg: str = ""
    structured_error_msg: str = ""
    ui_url: str | None = None
    roles: tuple[RoleStatus, ...] = ()
    # None while the app runs; once it ended: 0 if SUCCEEDED, else the exit code of the replica
    # that ended it (FAILED: the failing one; CANCELLED: the first stopped one, 143 = SIGTERM);
    # None only if no replica had exited (docs/cli.md). Filled here, so every backend agrees.
    exit_code: int | None = None
    num_requeues: int = 0  # runs again after a preemption or time limit (not in num_restarts)
    attempts: tuple[Attempt, ...] = ()  # the history, oldest first, when the backend keeps one
    ended: bool = False  # UNKNOWN, but over: nothing of it runs and its result is lost (msg)

    def __post_init__(self) -> None:
        if self.exit_code is None and self.state.is_terminal:
            object.__setattr__(self, "exit_code", _ended_with(self.state, self.replicas()))

    @property
    def is_terminal(self) -> bool:
        """True when the app can no longer change state (an ended UNKNOWN app included)."""
        return self.state.is_terminal or (self.ended and self.state == AppState.UNKNOWN)

    def replicas(self) -> Iterable[ReplicaStatus]:
        """Every replica of every role."""
        for rs in self.roles:
            yield from rs.replicas

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form with stable keys."""
        return {
            "state": self.state.name,
            "num_restarts": self.num_restarts,
            "msg": self.msg,
            "structured_error_msg": self.structured_error_msg,
            "ui_url": self.ui_url,
            "exit_code": self.exit_code,
            "roles": [r.to_dict() for r in self.roles],
            "num_requeues": self.num_requeues,
            "attempts": [a.to_dict() for a in self.attempts],
        }


@frozen
class ReplicaPlan:
    """One process a backend will start, when it plans them one by one (local)."""

    role: str
    replica_id: int
    cmd: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    log_dir: str
    node_agent: bool = False  # the process is trainlaunch's node agent (Role.node_agent)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the keys of a local request's replica)."""
        return {
            "role": self.role,
            "replica_id": self.replica_id,
            "cmd": list(self.cmd),
            "env": dict(self.env),
            "cwd": self.cwd,
            "log_dir": self.log_dir,
            "node_agent": self.node_agent,
        }


@frozen
class AppDryRunInfo:
    """What a scheduler would submit: the request and how to print it exactly."""

    request: Any
    fmt: Callable[[Any], str] = repr
    app: AppDef | None = None
    cfg: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    scheduler: str = ""
    app_id: str | None = None  # known before submission on backends that choose it
    replicas: tuple[ReplicaPlan, ...] = ()  # the processes, on backends that plan each one
    notes: tuple[str, ...] = ()  # lines shown after the request (e.g. node agents' rank plans)
    # values drawn at random for this request (app id, seed, port): submitting this request
    # uses them; another dryrun, or a later `run`, draws others (--dryrun shows placeholders)
    drawn: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # For a format that substituting its finished text would break (YAML: a masked value or a
    # placeholder in a plain scalar, a placeholder that is no valid name): the request as text
    # with a substitution applied to each of its strings first. None: fmt's text is substituted.
    fmt_substituted: Callable[[Any, Callable[[str], str]], str] | None = None

    def __str__(self) -> str:
        return "\n".join([self.fmt(self.request), *self.notes])

    def text(self, substitute: Callable[[str], str]) -> str:
        """The request and notes as text, with substitute (masking secrets, placeholders for
        drawn values) applied to them in a way that keeps the request's format valid."""
        if self.fmt_substituted is None:
            body = substitute(self.fmt(self.request))
        else:
            body = self.fmt_substituted(self.request, substitute)
        return "\n".join([body, *map(substitute, self.notes)])


from trainlaunch.handles import AppHandle, make_app_handle, parse_app_handle  # noqa: E402
from trainlaunch.options import CfgVal, runopt, runopts  # noqa: E402

__all__ = [
    "AppDef",
    "AppDryRunInfo",
    "AppHandle",
    "AppState",
    "AppStatus",
    "Attempt",
    "CfgVal",
    "ReplicaState",
    "ReplicaPlan",
    "ReplicaStatus",
    "Resource",
    "RetryPolicy",
    "Role",
    "RoleStatus",
    "SLOT_GROUP",
    "SlotGroup",
    "check_name",
    "is_terminal",
    "macros",
    "make_app_handle",
    "parse_app_handle",
    "runopt",
    "runopts",
]
