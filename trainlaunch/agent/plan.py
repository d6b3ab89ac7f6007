"""What one node runs: the engine, the rendezvous, and each rank's torchrun-2.13 environment.

Pure functions of the agent's flags and the replica's environment, so that ``--dryrun`` can
show per rank what it will receive (``dryrun.rank_envs``) and tests can check the contract
without starting anything. The rendezvous rules mirror ``torch.distributed.run.run()``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from trainlaunch import settings
from trainlaunch.agent import flags
from trainlaunch.agent.devices import local_nproc
from trainlaunch.errors import UsageError
from trainlaunch.values import frozen

AGENT = "agent"
TORCHRUN = "torchrun"
LOCAL_HOSTS = frozenset({"", "localhost", "127.0.0.1", "::1", "0.0.0.0"})


@frozen
class NodePlan:
    """Everything the torch-free agent needs to start this node's workers."""

    engine: str
    reason: str  # why this engine: shown by the dryrun and recorded in agent.json
    nnodes: int
    node_rank: int
    nproc: int
    role: str
    master_addr: str
    master_port: int | None  # None: node 0's agent hosts its store on a free port
    run_id: str | None  # None: a fresh uuid4, as torchrun's single-node default
    max_restarts: int
    command: tuple[str, ...]  # [python, -u, (-m), script, *args] or [script, *args]
    virtual_local_rank: bool = False

    @property
    def world_size(self) -> int:
        """Workers on all nodes."""
        return self.nnodes * self.nproc

    def rank(self, local_rank: int) -> int:
        """Global rank: every node runs nproc workers, ordered by node rank (as static torchrun)."""
        return self.node_rank * self.nproc + local_rank


def worker_command(args: flags.AgentArgs, python: str) -> tuple[str, ...]:
    """torchrun's worker command: ``[python, -u, (-m), script, *args]`` or the bare script."""
    if args.no_python:
        return (args.script, *args.script_args)
    return (python, "-u", *(["-m"] if args.module else []), args.script, *args.script_args)


def split_endpoint(endpoint: str, default_port: int | None) -> tuple[str, int | None]:
    """``host[:port]`` (IPv6 as ``[addr]:port``) -> (host, port)."""
    host, port = endpoint, None
    if endpoint.startswith("["):
        host, _, rest = endpoint[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
    elif endpoint.count(":") == 1:
        host, _, port = endpoint.partition(":")
    try:
        number = int(port) if port else default_port
    except ValueError:
        number = -1
    bare_v6 = ":" in host and not endpoint.startswith("[")  # `::::`, `fe80::1`: which is port?
    if not host or bare_v6 or (number is not None and not 0 <= number < 65536):
        raise UsageError(
            f"--rdzv-endpoint must be HOST[:PORT] (IPv6: [ADDR]:PORT), got {endpoint!r}"
        )
    return host, number


def on_this_host(host: str) -> bool:
    """Whether host names this machine: loopback, a wildcard, or its own host name (no DNS)."""
    from trainlaunch.agent.tcpstore.listen import only_this_host

    name = host.strip().lower().rstrip(".")
    own = os.uname().nodename.lower()
    return name in LOCAL_HOSTS or only_this_host(name) or name in (own, own.split(".")[0])


def torchrun_reason(args: flags.AgentArgs) -> str | None:
    """Why only real torchrun can run these flags (None: the torch-free agent can)."""
    lo, hi = flags.parse_nnodes(args.nnodes)
    backend = "c10d" if args.standalone else args.rdzv_backend
    if lo != hi:
        return f"elastic --nnodes {args.nnodes} needs torchrun's rendezvous"
    for dest, why in (
        ("run_path", "--run-path runs the script inside torchrun"),
        ("logs_specs", "--logs-specs loads a torchrun plugin"),
        ("numa_binding", "--numa-binding needs torch"),
    ):
        if args.values[dest]:
            return why
    if args.nproc_per_node == "xpu":
        return "--nproc-per-node xpu needs torch to count devices"
    if backend not in ("static", "c10d"):
        return f"--rdzv-backend {backend} is an external rendezvous"
    if backend == "c10d" and args.rdzv_endpoint:
        host, _ = split_endpoint(args.rdzv_endpoint, None)
        if hi > 1:  # wherever the endpoint is: the agent's world across nodes is static
            return (
                f"--rdzv-backend c10d across {hi} nodes assigns node ranks as the nodes join "
                "(torchrun's rendezvous; the agent runs --rdzv-backend static with --node-rank)"
            )
        if not on_this_host(host):
            return (
                f"--rdzv-endpoint {args.rdzv_endpoint} is on another host (an external c10d store)"
            )
    if hi > 1 and args.max_restarts > 0:
        return "restarts across nodes need torchrun's rendezvous to restart every node"
    return None


def choose_engine(args: flags.AgentArgs) -> tuple[str, str]:
    """(engine, reason): the torch-free agent for a static world, else torchrun."""
    why = torchrun_reason(args)
    if args.engine == TORCHRUN:
        return TORCHRUN, "--engine torchrun"
    if args.engine == AGENT:
        if why:
            raise UsageError(
                f"--engine agent cannot run this: {why}", hint="use --engine auto (or torchrun)"
            )
        return AGENT, "--engine agent"
    if why:
        return TORCHRUN, why
    return AGENT, "static world: nodes and workers per node are fixed"


def scheduler_starts_nodes(max_nodes: int, environ: Mapping[str, str]) -> bool:
    """True when the app's replicas are all of the job's nodes (the backend's rendezvous applies).

    False when ``dist.ddp`` made the app one node of a job the user coordinates (the command
    named the rendezvous, docs/ddp.md): then, as torchrun, only the flags count.
    """
    n = environ.get(settings.NUM_REPLICAS, "")
    return not n.isdigit() or int(n) >= max_nodes


def _given(args: flags.AgentArgs, dest: str, env: Mapping[str, str], name: str) -> Any:
    """The flag if given (command line or PET_*), else the backend's variable, else default."""
    if dest in args.given or name not in env:
        return args.values[dest]
    if not scheduler_starts_nodes(flags.parse_nnodes(args.nnodes)[1], env):
        return args.values[dest]
    return env[name]


def describe_nodes(agent_args: Sequence[str], replica_env: Mapping[str, str]) -> str:
    """For ``--dryrun``: who starts the job's nodes (trainlaunch, or one command per node)."""
    args = flags.parse(agent_args, replica_env)
    lo, hi = flags.parse_nnodes(args.nnodes)
    nodes = args.nnodes if lo != hi else str(hi)
    if hi == 1:
        return "nodes: 1 (this app is the whole job)"
    if scheduler_starts_nodes(hi, replica_env):
        return f"nodes: trainlaunch starts all {nodes} nodes of this job (one replica each)"
    rank = (
        f"node rank {args.node_rank}"
        if args.rdzv_backend == "static" and not args.standalone
        else "node rank assigned at rendezvous"
    )
    where = args.rdzv_endpoint or f"{args.master_addr}:{args.master_port or 29500}"
    return (
        f"nodes: this app is ONE node ({rank}) of a {nodes}-node job that meets at {where}; "
        "start the other nodes with the same command (as with torchrun)"
    )


def plan_node(
    args: flags.AgentArgs, environ: Mapping[str, str], python: str | None = None
) -> NodePlan:
    """Resolve engine, node rank, rendezvous address and worker command for this node."""
    engine, reason = choose_engine(args)
    lo, hi = flags.parse_nnodes(args.nnodes)
    python = python or environ.get("PYTHON_EXEC") or sys.executable
    nproc = local_nproc(args.nproc_per_node, environ)
    node_rank, port, run_id = 0, None, None
    if hi == 1:
        addr = "localhost"  # torchrun's single-node c10d store on localhost:0
        auto = args.rdzv_backend == "static" and not args.rdzv_endpoint and args.master_port is None
        if not (args.standalone or auto):
            run_id = args.rdzv_id
            if args.rdzv_backend == "static":
                addr, port = (
                    split_endpoint(args.rdzv_endpoint, 29500)
                    if args.rdzv_endpoint
                    else (args.master_addr, args.master_port)
                )
                node_rank = args.node_rank
    else:  # a static world across nodes: node 0's agent hosts the store at the backend's addr
        addr = _given(args, "master_addr", environ, settings.RANK0_HOST)
        port = int(_given(args, "master_port", environ, settings.RDZV_PORT) or 29500)
        if args.rdzv_endpoint:
            addr, port = split_endpoint(args.rdzv_endpoint, port)
        node_rank = int(_given(args, "node_rank", environ, settings.REPLICA_ID))
        run_id = str(_given(args, "rdzv_id", environ, settings.APP_ID))
    if node_rank >= hi:
        raise UsageError(f"node rank {node_rank} is out of range for --nnodes {args.nnodes}")
    return NodePlan(
        engine=engine,
        reason=reason,
        nnodes=hi,
        node_rank=node_rank,
        nproc=nproc,
        role=args.role,
        master_addr=addr,
        master_port=port,
        run_id=run_id,
        max_restarts=args.max_restarts,
        command=worker_command(args, python),
        virtual_local_rank=args.virtual_local_rank,
    )


def node_environ(args: flags.AgentArgs, nproc: int, environ: Mapping[str, str]) -> dict[str, str]:
    """Variables torchrun writes into its own environment, so every worker inherits them."""
    out = {"TORCHELASTIC_SIGNALS_TO_HANDLE": args.signals_to_handle}
    if "OMP_NUM_THREADS" not in environ and nproc > 1:
        out["OMP_NUM_THREADS"] = "1"  # torchrun's rule, with its banner
    return out


def worker_env(
    plan: NodePlan,
    local_rank: int,
    restart_count: int,
    master_port: int | str,
    run_id: str,
    error_file: str,
    environ: Mapping[str, str],
) -> dict[str, str]:
    """The variables torchrun 2.13 sets for one worker, on top of the inherited environment."""
    rank = plan.rank(local_rank)
    env = {
        "RANK": str(rank),
        "GROUP_RANK": str(plan.node_rank),
        "ROLE_RANK": str(rank),  # one role per node agent: role rank = global rank
        "ROLE_NAME": plan.role,
        "LOCAL_WORLD_SIZE": str(plan.nproc),
        "WORLD_SIZE": str(plan.world_size),
        "GROUP_WORLD_SIZE": str(plan.nnodes),
        "ROLE_WORLD_SIZE": str(plan.world_size),
        "MASTER_ADDR": plan.master_addr,
        "MASTER_PORT": str(master_port),
        "TORCHELASTIC_RESTART_COUNT": str(restart_count),
        "TORCHELASTIC_MAX_RESTARTS": str(plan.max_restarts),
        "TORCHELASTIC_RUN_ID": run_id,
        # node 0's agent hosts the c10d store (agent/tcpstore.py), as torchrun's agent does
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
        "LOCAL_RANK": str(local_rank),
        "TORCHELASTIC_ERROR_FILE": error_file,
    }
    if "OMP_NUM_THREADS" in environ:
        env["OMP_NUM_THREADS"] = environ["OMP_NUM_THREADS"]
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if plan.virtual_local_rank:
        env["LOCAL_RANK"] = "0"
        devices = visible.split(",") if visible is not None else None
        if devices is not None and local_rank >= len(devices):
            raise UsageError(f"local_rank {local_rank} exceeds CUDA_VISIBLE_DEVICES={visible}")
        env["CUDA_VISIBLE_DEVICES"] = devices[local_rank].strip() if devices else str(local_rank)
    elif visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return env


def shown_local_ranks(nproc: int, limit: int | None) -> list[int]:
    """The local ranks a dry run describes: all, or the first limit-1 and the last one."""
    if limit is None or nproc <= limit:
        return list(range(nproc))
    return [*range(max(limit - 1, 0)), nproc - 1]
