"""The torchrun engine: the same flags handed to real torchrun (``torch.distributed.run``).

Used for elastic or external rendezvous (``--nnodes MIN:MAX``, an explicit c10d/etcd
endpoint), restarts across nodes, and ``--engine torchrun``. The agent fills in what the
backend provides (rank 0's host, the rendezvous port, the node rank, the log directory),
then ``exec``s torchrun with the same interpreter, so from there on everything is torchrun's.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from trainlaunch import settings
from trainlaunch.agent import flags
from trainlaunch.agent.devices import local_nproc
from trainlaunch.agent.plan import shown_local_ranks, worker_command
from trainlaunch.errors import UsageError


def torchrun_values(
    args: flags.AgentArgs, environ: Mapping[str, str], log_dir: str | None
) -> dict[str, Any]:
    """The flags torchrun gets: the user's, plus the backend's rendezvous for multi-node."""
    values = {k: v for k, v in args.values.items() if k not in flags.NOT_TORCHRUNS}
    _, hi = flags.parse_nnodes(args.nnodes)
    host, port = environ.get(settings.RANK0_HOST), environ.get(settings.RDZV_PORT)

    def fill(dest: str, value: Any) -> None:
        if dest not in args.given and value is not None:
            values[dest] = value

    from trainlaunch.agent.plan import scheduler_starts_nodes

    if hi > 1 and not args.standalone and scheduler_starts_nodes(hi, environ):
        if args.rdzv_backend == "static":
            fill("master_addr", host)
            fill("master_port", int(port) if port else None)
            fill(
                "node_rank",
                int(environ[settings.REPLICA_ID]) if settings.REPLICA_ID in environ else None,
            )
        elif not args.rdzv_endpoint and host and port:
            values["rdzv_endpoint"] = f"{host}:{port}"
        fill("rdzv_id", environ.get(settings.APP_ID))  # every node must name the same run
    fill("log_dir", log_dir)
    return values


# torchrun's console script, as its interpreter runs it: ``python -m torch.distributed.run``
# would run the module as ``__main__``, whose logger (``get_logger(__name__)``) is outside the
# ``torch`` hierarchy that torch's logging prefixes (``W1202 04:09:14.379000 30926
# torch/distributed/run.py:874] ...``): torchrun's warnings would lose their prefix. The
# name ``torchrun`` is argparse's prog, as in torchrun's own messages.
TORCHRUN_ENTRY = (
    "import sys; from torch.distributed.run import main; sys.argv[0] = 'torchrun'; sys.exit(main())"
)


def torchrun_argv(
    args: flags.AgentArgs,
    environ: Mapping[str, str],
    log_dir: str | None,
    python: str | None = None,
) -> list[str]:
    """``[python, -c, TORCHRUN_ENTRY, <flags>, script, *args]``: real torchrun, as its console
    script starts it, with this interpreter (the ``torchrun`` on PATH may be another's)."""
    python = python or sys.executable
    return [
        python,
        "-c",
        TORCHRUN_ENTRY,
        *flags.render(torchrun_values(args, environ, log_dir)),
        *flags.program(args.script, args.script_args),
    ]


def torchrun_plan(
    args: flags.AgentArgs,
    environ: Mapping[str, str],
    python: str | None,
    max_ranks: int | None = None,
) -> list[dict[str, Any]]:
    """What the dryrun can say about ranks torchrun will start (ranks known only if static)."""
    values = torchrun_values(args, environ, None)
    lo, hi = flags.parse_nnodes(args.nnodes)
    static = lo == hi and values["rdzv_backend"] == "static" and not args.standalone
    python = python or environ.get("PYTHON_EXEC") or sys.executable
    common = {
        "engine": "torchrun",
        "argv": list(worker_command(args, python)),
        "launcher": torchrun_argv(args, environ, None, python),
    }
    try:
        nproc = local_nproc(args.nproc_per_node, environ)
    except UsageError:  # xpu & co: only torchrun can count them
        return [{"rank": None, "local_rank": None, "env": {}, **common}]
    node = int(values["node_rank"]) if static else None
    out = []
    for lr in shown_local_ranks(nproc, max_ranks):
        rank = node * nproc + lr if node is not None else None
        env = {
            "LOCAL_RANK": str(lr),
            "LOCAL_WORLD_SIZE": str(nproc),
            "RANK": str(rank) if rank is not None else "<assigned at rendezvous>",
            "WORLD_SIZE": str(hi * nproc) if lo == hi else "<assigned at rendezvous>",
            "ROLE_NAME": args.role,
            "TORCHELASTIC_MAX_RESTARTS": str(args.max_restarts),
            "TORCHELASTIC_USE_AGENT_STORE": "True",
        }
        out.append({"rank": rank, "local_rank": lr, "env": env, **common})
    return out
