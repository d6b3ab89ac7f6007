"""torchrun 2.13's flag table, shared by the ``dist.ddp`` component and the node agent.

One table, three uses: the agent's argparse parser (both spellings, as torchrun), the
component's validation and rendering of agent flags, and the ``PET_<DEST>`` defaults
torchrun reads from the environment (command line > ``PET_*`` > default). Pure: no I/O
beyond the environment mapping it is given; never imports torch.
"""

from __future__ import annotations

import argparse
import functools
import re
import signal
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from trainlaunch.errors import UsageError
from trainlaunch.values import frozen

Kind = Literal["str", "int", "float", "bool", "list"]
ENGINES = ("auto", "agent", "torchrun")
DEVICE_NPROCS = ("auto", "cpu", "gpu", "xpu")  # torchrun's named --nproc-per-node values
RDZV_BACKENDS = ("static", "c10d", "etcd", "etcd-v2")  # torchrun 2.13's registered handlers
MAX_NPROC_PER_NODE = 1024  # workers one node can run; refused before any per-rank planning
MAX_NNODES = 100_000  # specs.MAX_REPLICAS: no backend runs more nodes


@frozen
class Flag:
    """One torchrun option: its destination, spellings, kind and default."""

    dest: str
    options: tuple[str, ...]
    kind: Kind
    default: Any
    env: bool = True  # torchrun also reads PET_<DEST>
    choices: tuple[str, ...] | None = None
    help: str = ""

    @property
    def flag(self) -> str:
        """The canonical (first long) spelling."""
        return next(o for o in self.options if o.startswith("--"))

    @property
    def env_name(self) -> str:
        """The PET_* variable torchrun reads for this flag."""
        return f"PET_{self.dest.upper()}"


def _f(dest: str, opts: str, kind: Kind, default: Any, **kw: Any) -> Flag:
    return Flag(dest, tuple(opts.split()), kind, default, **kw)


# Order, spellings, kinds and defaults as in torch 2.13's torch/distributed/run.py.
FLAGS: tuple[Flag, ...] = (
    _f("nnodes", "--nnodes", "str", "1:1", help="number of nodes, N or MIN:MAX (elastic)"),
    _f(
        "nproc_per_node",
        "--nproc-per-node --nproc_per_node",
        "str",
        "1",
        help="workers per node: an integer, or auto, cpu, gpu, xpu (one per device)",
    ),
    _f(
        "rdzv_backend",
        "--rdzv-backend --rdzv_backend",
        "str",
        "static",
        help="rendezvous backend: static, c10d, etcd, etcd-v2",
    ),
    _f(
        "rdzv_endpoint",
        "--rdzv-endpoint --rdzv_endpoint",
        "str",
        "",
        help="rendezvous endpoint, HOST:PORT",
    ),
    _f(
        "rdzv_id", "--rdzv-id --rdzv_id", "str", "none", help="the job's id, the same on every node"
    ),
    _f(
        "rdzv_conf",
        "--rdzv-conf --rdzv_conf",
        "str",
        "",
        help="more rendezvous settings, K=V,K=V (join_timeout, last_call_timeout, ...)",
    ),
    _f(
        "standalone",
        "--standalone",
        "bool",
        False,
        help="one node: a local c10d rendezvous on a free port (the --rdzv-* values are ignored)",
    ),
    _f(
        "max_restarts",
        "--max-restarts --max_restarts",
        "int",
        0,
        help="restarts of the node's workers before the job fails",
    ),
    _f(
        "monitor_interval",
        "--monitor-interval --monitor_interval",
        "float",
        0.1,
        help="seconds between checks of the workers",
    ),
    _f(
        "start_method",
        "--start-method --start_method",
        "str",
        "spawn",
        choices=("spawn", "fork", "forkserver"),
        help="how the workers are started (multiprocessing's start method)",
    ),
    _f(
        "event_log_handler",
        "--event-log-handler --event_log_handler",
        "str",
        "null",
        help="a registered torchelastic event handler",
    ),
    _f("role", "--role", "str", "default", help="the workers' role name"),
    _f("module", "-m --module", "bool", False, help="SCRIPT is a module, run as python -m"),
    _f(
        "no_python",
        "--no-python --no_python",
        "bool",
        False,
        help="run SCRIPT itself, not with python (a binary or a shell script)",
    ),
    _f(
        "run_path",
        "--run-path --run_path",
        "bool",
        False,
        help="run SCRIPT (an absolute path) with runpy.run_path in the worker's interpreter",
    ),
    _f(
        "log_dir",
        "--log-dir --log_dir",
        "str",
        None,
        help="directory for the workers' log files (a subdirectory per run)",
    ),
    _f(
        "redirects",
        "-r --redirects",
        "str",
        "0",
        help="workers' streams into files: 0 none, 1 stdout, 2 stderr, 3 both; or "
        "per local rank, 0:1,1:2",
    ),
    _f(
        "tee",
        "-t --tee",
        "str",
        "0",
        help="as --redirects, and also on the console, lines prefixed [default0]:",
    ),
    _f(
        "local_ranks_filter",
        "--local-ranks-filter --local_ranks_filter",
        "str",
        "",
        help="show only these local ranks' lines on the console, 0,1,2",
    ),
    _f(
        "duplicate_stdout_filters",
        "--duplicate-stdout-filters --duplicate_stdout_filters",
        "list",
        (),
        help="also copy stdout lines that contain one of these words to a file, a,b",
    ),
    _f(
        "duplicate_stderr_filters",
        "--duplicate-stderr-filters --duplicate_stderr_filters",
        "list",
        (),
        help="the same for stderr",
    ),
    _f(
        "node_rank",
        "--node-rank --node_rank",
        "int",
        0,
        help="this node's rank (static rendezvous only)",
    ),
    _f(
        "master_addr",
        "--master-addr --master_addr",
        "str",
        "127.0.0.1",
        help="rank 0's host (static rendezvous only)",
    ),
    _f(
        "master_port",
        "--master-port --master_port",
        "int",
        None,
        help="rank 0's port (static rendezvous only; default 29500)",
    ),
    _f(
        "local_addr",
        "--local-addr --local_addr",
        "str",
        None,
        help="this node's address for the others (default: its host name)",
    ),
    _f(
        "logs_specs",
        "--logs-specs --logs_specs",
        "str",
        None,
        env=False,
        help="a torchrun.logs_specs entry point that decides where logs go",
    ),
    _f(
        "numa_binding",
        "--numa-binding --numa_binding",
        "str",
        None,
        env=False,
        choices=("node", "socket", "exclusive", "core-complex"),
        help="bind each worker to the CPUs near its GPU",
    ),
    _f(
        "signals_to_handle",
        "--signals-to-handle --signals_to_handle",
        "str",
        "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
        help="signals forwarded to the workers (add SIGUSR1,SIGUSR2 for Slurm)",
    ),
    _f(
        "shutdown_timeout",
        "--shutdown-timeout --shutdown_timeout",
        "int",
        None,
        help="seconds the workers have to stop before SIGKILL (default 30)",
    ),
    _f(
        "virtual_local_rank",
        "--virtual-local-rank --virtual_local_rank",
        "bool",
        False,
        help="LOCAL_RANK=0 in every worker, each seeing only its own GPU",
    ),
    # trainlaunch's own: which engine runs this node (docs/ddp.md)
    _f(
        "engine",
        "--engine",
        "str",
        "auto",
        env=False,
        choices=ENGINES,
        help="auto: the torch-free agent when it can, else torchrun",
    ),
)
# trainlaunch's own, which `run --preflight` inserts into every node agent's argv
# (agent/request.py; docs/preflight.md): no dist.ddp parameter, never handed to torchrun.
PREFLIGHT_FLAGS: tuple[Flag, ...] = (
    _f("preflight", "--preflight", "bool", False, env=False, help="check every node first"),
    _f(
        "preflight_match",
        "--preflight-match",
        "list",
        (),
        env=False,
        help="what every node must share (default: all of it)",
    ),
    _f(
        "preflight_slow_factor",
        "--preflight-slow-factor",
        "float",
        None,
        env=False,
        help="a node this many times slower than the others fails (0: report only; "
        "default: 2 for NCCL, gloo only reported)",
    ),
    _f(
        "preflight_timeout",
        "--preflight-timeout",
        "float",
        300.0,
        env=False,
        help="seconds the nodes have to meet and pass",
    ),
)
AGENT_FLAGS: tuple[Flag, ...] = FLAGS + PREFLIGHT_FLAGS  # what the agent's parser accepts
NOT_TORCHRUNS = frozenset({"engine", *(f.dest for f in PREFLIGHT_FLAGS)})
BY_DEST: Mapping[str, Flag] = {f.dest: f for f in AGENT_FLAGS}


@frozen
class AgentArgs:
    """Resolved flags (command line > PET_* > default) plus the training command."""

    values: Mapping[str, Any]
    script: str
    script_args: tuple[str, ...] = ()
    given: frozenset[str] = frozenset()  # dests set on the command line or by PET_*

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


class ValueRejected(UsageError):
    """A value torchrun's argparse accepts and its own code then rejects.

    Still a usage error (exit 2) everywhere but ``trainlaunch torchrun``, which exits 1 for
    these as torchrun does (its exception ends it); argparse's own errors exit 2 in both.
    """


def comma_list(value: str) -> tuple[str, ...]:
    """torchrun's comma_separated_list: ``,,`` escapes a comma."""
    placeholder = "\0"
    return tuple(i.replace(placeholder, ",") for i in value.replace(",,", placeholder).split(","))


def convert(flag: Flag, raw: str) -> Any:
    """Turn one command-line or PET_* string into the flag's value (UsageError if bad)."""
    try:
        if flag.kind == "int":
            return int(raw)
        if flag.kind == "float":
            return float(raw)
        if flag.kind == "bool":  # torchrun's check_env: bool(int(PET_X)), outside argparse
            return _pet_bool(flag, raw)
        if flag.kind == "list":
            return comma_list(raw)
    except ValueError:
        what = {"int": "an integer", "float": "a number", "bool": "0 or 1"}[flag.kind]
        raise UsageError(f"{flag.flag} must be {what}, got {raw!r}") from None
    if flag.choices and raw not in flag.choices:
        raise UsageError(f"{flag.flag} must be one of {', '.join(flag.choices)}, got {raw!r}")
    return raw


def _pet_bool(flag: Flag, raw: str) -> bool:
    try:
        return bool(int(raw))
    except ValueError:
        raise ValueRejected(f"{flag.env_name} must be 0 or 1, got {raw!r}") from None


def resolve(cli: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[dict[str, Any], set[str]]:
    """Fill every flag: the command line, else ``PET_<DEST>``, else torchrun's default."""
    values: dict[str, Any] = {}
    given = set(cli)
    for flag in AGENT_FLAGS:
        if flag.dest in cli:
            values[flag.dest] = cli[flag.dest]
        elif flag.env and flag.env_name in environ:
            values[flag.dest] = convert(flag, environ[flag.env_name])
            given.add(flag.dest)
        else:
            values[flag.dest] = flag.default
    return values, given


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting (dryrun calls it in-process)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise UsageError(message, hint=f"{self.prog} --help lists every flag")


@functools.lru_cache(maxsize=4)
def parser(prog: str = "python -m trainlaunch.agent") -> argparse.ArgumentParser:
    """The agent's parser: every torchrun 2.13 flag in both spellings, then the script (made
    once per prog: a dry-run parses twice, and each flag costs argparse a formatter)."""
    p = _Parser(
        prog=prog,
        description="trainlaunch's torch-free node agent (torchrun-compatible flags).",
        argument_default=argparse.SUPPRESS,  # absent flags stay absent: PET_* may fill them
    )
    for flag in AGENT_FLAGS:
        if flag.kind == "bool":
            p.add_argument(*flag.options, dest=flag.dest, action="store_true", help=flag.help)
        else:
            p.add_argument(
                *flag.options,
                dest=flag.dest,
                metavar=flag.dest.upper(),
                type=_Converter(flag),
                help=flag.help,
            )
    p.add_argument("training_script")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


@frozen
class _Converter:
    """argparse ``type=``: one flag's conversion, errors as argparse's own."""

    flag: Flag

    def __call__(self, raw: str) -> Any:
        try:
            return convert(self.flag, raw)
        except UsageError as e:
            raise argparse.ArgumentTypeError(str(e)) from None


def parse(
    argv: Sequence[str], environ: Mapping[str, str], prog: str = "python -m trainlaunch.agent"
) -> AgentArgs:
    """Parse agent argv exactly as torchrun would; UsageError for what torchrun rejects.

    argparse's errors (an unknown option, a missing or mistyped value, no script; a PET_*
    value argparse converts) are plain UsageErrors; what torchrun rejects after parsing is a
    ValueRejected (see there).
    """
    ns = vars(parser(prog).parse_args(list(argv)))
    script = ns.pop("training_script")
    script_args = tuple(ns.pop("training_script_args", ()))
    values, given = resolve(ns, environ)
    args = AgentArgs(values, script, script_args, frozenset(given))
    try:
        validate(args)
    except ValueRejected:
        raise
    except UsageError as e:
        raise ValueRejected(e.message, e.hint) from None
    return args


# --- validation (torchrun's rules, raised as one-line UsageErrors) -----------------------------

_STD_VALUE = re.compile(r"^[0123]$")
_STD_MAPPING = re.compile(r"^(\d:[0123],)*(\d:[0123])$")


def parse_nnodes(nnodes: str) -> tuple[int, int]:
    """``N`` or ``MIN:MAX`` -> (min, max) with 0 < min <= max."""
    parts = str(nnodes).split(":")
    try:
        if len(parts) not in (1, 2):
            raise ValueError
        lo, hi = int(parts[0]), int(parts[-1])
    except ValueError:
        raise UsageError(f"--nnodes must be N or MIN:MAX, got {nnodes!r}") from None
    if not 0 < lo <= hi:
        raise UsageError(f"--nnodes: need 0 < MIN <= MAX, got {nnodes!r}")
    if hi > MAX_NNODES:
        raise UsageError(f"--nnodes: at most {MAX_NNODES} nodes, got {hi}")
    return lo, hi


def check_nproc(nproc: str) -> None:
    """An integer >= 1 or one of torchrun's device names."""
    if str(nproc) in DEVICE_NPROCS:
        return
    try:
        n = int(nproc)
    except ValueError:
        raise UsageError(
            f"--nproc-per-node: unsupported value {nproc!r}; use an integer or "
            f"{', '.join(DEVICE_NPROCS)}"
        ) from None
    if n < 1:
        raise UsageError(f"--nproc-per-node must be >= 1, got {n}")
    if n > MAX_NPROC_PER_NODE:
        raise UsageError(
            f"--nproc-per-node: at most {MAX_NPROC_PER_NODE} workers per node, got {n}"
        )


def parse_std(value: str, what: str) -> int | dict[int, int]:
    """torchrun's Std.from_str: ``0``-``3`` or ``local_rank:N,...`` (1=out, 2=err, 3=both)."""
    if _STD_VALUE.match(value):
        return int(value)
    if _STD_MAPPING.match(value):
        return {int(k): int(v) for k, v in (m.split(":") for m in value.split(","))}
    raise UsageError(f"{what} must be 0-3 or LOCAL_RANK:0-3,..., got {value!r}")


def parse_ranks_filter(value: str) -> frozenset[int] | None:
    """Comma-separated local ranks, or None for "all"."""
    if not value:
        return None
    try:
        return frozenset(int(v) for v in value.split(","))
    except ValueError:
        raise UsageError(
            f"--local-ranks-filter must be comma-separated integers, e.g. 0,1,2, got {value!r}"
        ) from None


def parse_signals(value: str) -> tuple[signal.Signals, ...]:
    """``SIGTERM,SIGUSR1`` -> signals (torchrun warns on a bad name; we refuse it)."""
    out = []
    for name in (n.strip() for n in value.split(",") if n.strip()):
        sig = getattr(signal, name, None)
        if not isinstance(sig, signal.Signals) or sig in (signal.SIGKILL, signal.SIGSTOP):
            raise UsageError(f"--signals-to-handle: {name!r} is not a signal that can be handled")
        out.append(sig)
    return tuple(out)


def parse_rdzv_conf(value: str) -> dict[str, str]:
    """torchrun's ``k1=v1,k2=v2`` rendezvous configuration."""
    conf: dict[str, str] = {}
    for kv in value.strip().split(",") if value.strip() else []:
        key, _, val = kv.partition("=")
        if not key.strip() or not val.strip():
            raise UsageError(f"--rdzv-conf must be KEY=VALUE,..., got {value!r}")
        conf[key.strip()] = val.strip()
    return conf


def validate(args: AgentArgs) -> None:
    """Reject what torchrun rejects, each with a one-line message."""
    parse_nnodes(args.nnodes)
    check_nproc(args.nproc_per_node)
    if args.max_restarts < 0:
        raise UsageError(f"--max-restarts must be >= 0, got {args.max_restarts}")
    if args.module and args.no_python:
        raise UsageError("don't use both the '--no-python' flag and the '--module' flag")
    parse_std(args.redirects, "--redirects")
    parse_std(args.tee, "--tee")
    parse_ranks_filter(args.local_ranks_filter)
    parse_signals(args.signals_to_handle)
    parse_rdzv_conf(args.rdzv_conf)
    if args.rdzv_backend not in RDZV_BACKENDS:
        raise UsageError(
            f"--rdzv-backend: unknown backend {args.rdzv_backend!r}; "
            f"use one of {', '.join(RDZV_BACKENDS)}"
        )
    if args.shutdown_timeout is not None and args.shutdown_timeout < 0:
        raise UsageError(f"--shutdown-timeout must be >= 0, got {args.shutdown_timeout}")
    if args.master_port is not None and not 0 <= args.master_port < 65536:
        raise UsageError(f"--master-port must be in 0-65535, got {args.master_port}")
    if args.node_rank < 0:
        raise UsageError(f"--node-rank must be >= 0, got {args.node_rank}")
    if args.monitor_interval <= 0:
        raise UsageError(f"--monitor-interval must be > 0, got {args.monitor_interval}")
    if not args.script:
        raise UsageError("no training script given")


def program(script: str, script_args: Sequence[str]) -> list[str]:
    """``script *args`` as torchrun's parser reads it back (it drops a ``--`` after the script)."""
    return [script, *(["--"] if list(script_args[:1]) == ["--"] else []), *script_args]


def render(values: Mapping[str, Any]) -> list[str]:
    """Agent argv for the flags whose value differs from torchrun's default (table order)."""
    out: list[str] = []
    for flag in AGENT_FLAGS:
        if flag.dest not in values:
            continue
        v = values[flag.dest]
        if v is None or v == flag.default:
            continue
        if flag.kind == "bool":
            out.append(flag.flag)
        elif flag.kind == "list":
            out += [flag.flag, ",".join(s.replace(",", ",,") for s in v)]
        else:
            out += [flag.flag, str(v)]
    return out
