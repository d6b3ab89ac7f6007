"""Distributed training components: ``dist.ddp`` (torchrun-compatible, one replica per node).

Each replica runs ``python -m trainlaunch.agent [torchrun flags] SCRIPT ARGS``: a torch-free
agent that starts the node's workers with torchrun 2.13's exact environment (or hands elastic
and external rendezvous to real torchrun). docs/ddp.md has the details and the differences.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, Literal

from trainlaunch import specs
from trainlaunch.agent import flags, grammar
from trainlaunch.errors import ComponentError, UsageError

from .utils import safe_name

# Extra option names (the resolver reads this table): torchrun's spellings and TorchX's.
ALIASES = {
    "nproc": "nproc_per_node",
    "module": "m",
    "r": "redirects",
    "t": "tee",
    "rdzv_port": "master_port",
}

# torchrun's grammar: abbreviations, -m as a switch, the program after the script
ARGV_GRAMMAR = {"ddp": grammar.normalize}

DEBUG_ENV = {  # debug=True: the switches that make distributed failures explain themselves
    "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
    "TORCH_SHOW_CPP_STACKTRACES": "1",
    "NCCL_DEBUG": "INFO",
    "CUDA_LAUNCH_BLOCKING": "1",
    "LOGLEVEL": "INFO",
}
_COMPONENT_ONLY = (
    "script_args",
    "script",
    "m",
    "j",
    "cpu",
    "gpu",
    "memMB",
    "env",
    "max_retries",
    "debug",
    "name",
    "image",
    "python",
)


def ddp(
    *script_args: str,
    script: str | None = None,
    m: str | None = None,
    no_python: bool = False,
    j: str | None = None,
    nproc_per_node: str = "1",
    nnodes: str = "1",
    max_restarts: int = 0,
    rdzv_backend: str = "static",
    rdzv_endpoint: str = "",
    rdzv_id: str | None = None,
    rdzv_conf: str = "",
    standalone: bool = False,
    master_addr: str | None = None,
    master_port: int | None = None,
    node_rank: int | None = None,
    role: str = "default",
    log_dir: str | None = None,
    redirects: str = "0",
    tee: str | None = None,
    local_ranks_filter: str = "",
    duplicate_stdout_filters: str = "",
    duplicate_stderr_filters: str = "",
    monitor_interval: float = 0.1,
    shutdown_timeout: int | None = None,
    signals_to_handle: str = "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
    virtual_local_rank: bool = False,
    local_addr: str | None = None,
    start_method: Literal["spawn", "fork", "forkserver"] = "spawn",
    event_log_handler: str = "null",
    run_path: bool = False,
    logs_specs: str | None = None,
    numa_binding: Literal["node", "socket", "exclusive", "core-complex"] | None = None,
    engine: Literal["auto", "agent", "torchrun"] = "auto",
    cpu: int | None = None,
    gpu: int = 0,
    memMB: int | None = None,  # noqa: N803 (the Resource field's spelling)
    env: dict[str, str] | None = None,
    max_retries: int = 0,
    debug: bool = False,
    name: str | None = None,
    image: str = "",
    python: str | None = None,
) -> specs.AppDef:
    """Distributed data-parallel training, torchrun-compatible: one replica per node.

    ``trainlaunch run dist.ddp --nproc 4 train.py --lr 0.1`` runs 4 workers with exactly
    torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...). Every torchrun
    flag is accepted; unset flags fall back to ``PET_<FLAG>`` variables as in torchrun.
    Per-rank logs are always kept; a failure names the rank, exit code or signal and shows
    its traceback. docs/ddp.md lists the differences from torchrun.

    Args:
        script_args: the script, then its arguments (unless --script or -m is given); the
            script is checked as for --script
        script: the training script; the local backend checks that it exists (relative to
            the replicas' working directory); on Slurm and Kubernetes it is a path on the
            cluster or in the image, checked only when the job starts
        m: the script is a module (-m MODULE, like ``python -m``)
        no_python: run the script directly (an executable), not with python
        j: shorthand for nodes x workers: [MIN:]NxM, or M for one node
        nproc_per_node: workers per node: a number, or auto, cpu, gpu
        nnodes: nodes: N, or MIN:MAX for elastic training (runs real torchrun)
        max_restarts: restart all workers of a node this often after a failure
        rdzv_backend: rendezvous: static (default), c10d, etcd, etcd-v2
        rdzv_endpoint: rendezvous HOST:PORT (default: the scheduler's rank-0 host)
        rdzv_id: rendezvous run id (default: the app id on several nodes)
        rdzv_conf: rendezvous settings KEY=VALUE,...
        standalone: single-node rendezvous on a free local port
        master_addr: rank 0's host for a static world (default: the scheduler's)
        master_port: rank 0's port for a static world (default: a free port)
        node_rank: this command is node N of a job you start node by node
        role: the workers' ROLE_NAME and log-line prefix
        log_dir: where per-rank logs go (default: the replica's log directory)
        redirects: streams to files only: 0-3 or LOCAL_RANK:0-3,... (1 out, 2 err, 3 both)
        tee: streams to files and the console with [role+local_rank]: prefixes (default 3, or 0 with --redirects)
        local_ranks_filter: show only these local ranks on the console, e.g. 0
        duplicate_stdout_filters: copy teed stdout lines containing any of these to a file
        duplicate_stderr_filters: the same for stderr
        monitor_interval: accepted for torchrun compatibility (the agent does not poll)
        shutdown_timeout: seconds between the stop signal and SIGKILL (default 30)
        signals_to_handle: signals forwarded to the workers
        virtual_local_rank: LOCAL_RANK=0 and one GPU per worker via CUDA_VISIBLE_DEVICES
        local_addr: this node's address for the rendezvous (torchrun engine)
        start_method: accepted for torchrun compatibility (scripts are always spawned)
        event_log_handler: torchrun's event log handler (torchrun engine)
        run_path: run the script inside torchrun with runpy (torchrun engine)
        logs_specs: torchrun logs-specs plugin (torchrun engine)
        numa_binding: bind workers near their GPU (torchrun engine)
        engine: auto (torch-free agent when possible), agent, or torchrun
        cpu: CPUs per node (default: one per worker)
        gpu: GPUs per node
        memMB: memory per node in MiB (default: none requested, the cluster's default
            applies: Slurm's DefMemPerNode/DefMemPerCPU, a Kubernetes LimitRange)
        env: extra environment variables, KEY=VALUE,...
        max_retries: how often the scheduler restarts the whole app after a failure
        debug: verbose distributed debugging (TORCH_DISTRIBUTED_DEBUG=DETAIL, NCCL_DEBUG=INFO, ...)
        name: app name, or APP/ROLE (default: from the script or module)
        image: container image (schedulers that run containers)
        python: interpreter on the nodes (default: this one, or python in an image)
    """
    given = {k: v for k, v in locals().items() if k not in _COMPONENT_ONLY}
    try:
        values, program, named = _agent_values(given, script_args, script, m, j)
        flags.validate(flags.AgentArgs(values, program[0], program[1:]))
        lo, hi = flags.parse_nnodes(values["nnodes"])
        _check_placement(values, hi)
        one_node = user_coordinated(named, hi)
    except UsageError as e:
        raise ComponentError(e.message, hint=e.hint) from None  # the resolver names us
    target = m or PurePath(program[0]).name
    default_name = safe_name(target.rsplit(".", 1)[-1] if m else PurePath(target).stem, "ddp")
    app_name, _, role_name = (name or default_name).partition("/")
    args = (
        *specs.NODE_AGENT_ARGS,
        *flags.render(values),
        *flags.program(program[0], program[1:]),
    )
    if m is not None:  # a module: importable on the nodes, which only the nodes can tell
        checkable = {}
    elif no_python and "/" not in program[0]:
        checkable = {specs.PROGRAM: {"command": program[0]}}
    else:
        checkable = {specs.PROGRAM: {"path": program[0]}}
    nproc = values["nproc_per_node"]
    role_ = specs.Role(
        name=role_name or app_name,
        entrypoint=python or ("python" if image else sys.executable),
        args=args,
        image=image,
        env={**(DEBUG_ENV if debug else {}), **(env or {})},
        num_replicas=1 if one_node else hi,
        min_replicas=lo if lo != hi and not one_node else None,
        max_retries=max_retries,
        resource=specs.Resource(
            cpu=cpu if cpu is not None else _workers(nproc), gpu=gpu, memMB=memMB or 0
        ),
        node_agent=True,
        metadata=checkable,
    )
    return specs.AppDef(name=app_name, roles=(role_,))


def _agent_values(
    given: Mapping[str, Any],
    script_args: tuple[str, ...],
    script: str | None,
    m: str | None,
    j: str | None,
) -> tuple[dict[str, Any], tuple[str, ...], dict[str, Any]]:
    """The agent flags (PET_* filling defaults, as torchrun), [script, *args], and the
    rendezvous flags the command (or PET_*) named itself."""
    defaults = _defaults()
    values: dict[str, Any] = {f.dest: f.default for f in flags.FLAGS}
    values["tee"] = None
    named: dict[str, Any] = {}
    if flags.BY_DEST["module"].env_name in os.environ:
        values["module"] = flags.convert(flags.BY_DEST["module"], os.environ["PET_MODULE"])
    for dest, value in given.items():
        flag = flags.BY_DEST[dest]
        if value == defaults[dest] and flag.env and flag.env_name in os.environ:
            value = flags.convert(flag, os.environ[flag.env_name])  # torchrun's PET_* rule
        if flag.kind == "list" and isinstance(value, str):
            value = flags.comma_list(value) if value else ()
        if value is not None:  # None: "the agent decides" (scheduler's host, port, rank)
            values[dest] = value
            named[dest] = value
    if j is not None:
        if values["nnodes"] not in ("1", "1:1") or values["nproc_per_node"] != "1":
            raise UsageError("give either -j or --nnodes/--nproc-per-node, not both")
        values["nnodes"], values["nproc_per_node"] = parse_j(j)
    if flags.parse_nnodes(values["nnodes"]) == (1, 1):
        values["nnodes"] = "1:1"  # torchrun's default spelling: not rendered
    if values["tee"] is None:  # an explicit --redirects wins over dist.ddp's default --tee 3
        values["tee"] = "0" if values["redirects"] != "0" else "3"
    if m is None and values["module"] and script is None and script_args:
        m, script_args = script_args[0], script_args[1:]  # PET_MODULE=1: torchrun's switch
    if script is not None and m is not None:
        raise UsageError("give either --script or -m, not both")
    if m is not None:
        values["module"] = True
        return values, (m, *script_args), named
    if script is not None:
        return values, (script, *script_args), named
    if not script_args:
        raise UsageError(
            "no training script: give SCRIPT [ARGS...], --script or -m MODULE",
            hint="e.g. trainlaunch run dist.ddp --nproc 2 train.py --lr 0.1",
        )
    return values, tuple(script_args), named


def parse_j(j: str) -> tuple[str, str]:
    """``[MIN:]NxM`` -> (nnodes, nproc_per_node); ``M`` -> ("1", M)."""
    nodes, sep, nproc = j.rpartition("x")
    if not sep:
        nodes, nproc = "1", j
    try:
        parts = nodes.split(":")
        lo, hi = int(parts[0]), int(parts[-1])
        if len(parts) > 2 or int(nproc) < 1 or not 0 < lo <= hi:
            raise ValueError
    except ValueError:
        raise UsageError(f"-j must be [MIN:]NxM or M with positive integers, got {j!r}") from None
    flags.parse_nnodes(nodes)  # the bounds, with their own messages
    flags.check_nproc(nproc)
    return nodes, nproc


def user_coordinated(named: Mapping[str, Any], max_nodes: int) -> bool:
    """True when the command names the rendezvous itself: the app is one node of that job.

    ``--node-rank``, or (with several nodes) an endpoint other commands will also use:
    ``--rdzv-endpoint``, or ``--master-addr`` with ``--master-port``. Then each command is
    one node, exactly like one torchrun; otherwise trainlaunch starts every node.
    """
    if "node_rank" in named:
        return True
    if max_nodes <= 1 or named.get("standalone"):
        return False
    return bool(named.get("rdzv_endpoint")) or {"master_addr", "master_port"} <= set(named)


def _check_placement(values: Mapping[str, Any], max_nodes: int) -> None:
    """What only makes sense on one node, or inside the job."""
    if not 0 <= values["node_rank"] < max_nodes:
        raise UsageError(
            f"--node-rank {values['node_rank']} is out of range for --nnodes {values['nnodes']}"
        )
    if values["standalone"] and max_nodes > 1:
        raise UsageError(
            f"--standalone is a single-node rendezvous; it cannot span --nnodes {values['nnodes']}"
        )
    if values.get("rdzv_endpoint"):  # checked at submission, not when the agent starts
        from trainlaunch.agent.plan import split_endpoint

        split_endpoint(str(values["rdzv_endpoint"]), None)


def _workers(nproc: str) -> int:
    try:
        return max(int(nproc), 1)
    except ValueError:
        return 1


def _defaults() -> dict[str, Any]:
    import inspect

    return {
        p.name: p.default
        for p in inspect.signature(ddp).parameters.values()
        if p.name not in _COMPONENT_ONLY
    }
