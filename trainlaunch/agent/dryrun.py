"""What each rank of a node agent will receive, for ``--dryrun`` (the agent's own plan).

Kept apart from plan.py so plan never imports torchrun.py (torchrun.py builds on plan).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainlaunch import settings
from trainlaunch.agent import flags
from trainlaunch.agent.plan import (
    AGENT,
    TORCHRUN,
    choose_engine,
    node_environ,
    plan_node,
    shown_local_ranks,
    worker_env,
)
from trainlaunch.agent.torchrun import torchrun_plan


def rank_envs(
    agent_args: Sequence[str],
    replica_env: Mapping[str, str],
    python: str | None = None,
    max_ranks: int | None = None,
) -> list[dict[str, Any]]:
    """Per rank of this node: rank, local_rank, argv and the variables the agent adds.

    For ``--dryrun``: values only known at start time are shown as ``<...>`` placeholders.
    Ranks of an elastic (torchrun) world are assigned at rendezvous: ``rank`` is None.
    With max_ranks, only ``plan.shown_local_ranks`` are planned (a big node stays cheap).
    """
    args = flags.parse(agent_args, replica_env)
    engine, _ = choose_engine(args)
    if engine == TORCHRUN:
        return torchrun_plan(args, replica_env, python, max_ranks)
    plan = plan_node(args, replica_env, python)
    inherited = node_environ(args, plan.nproc, replica_env)  # shown too: every rank gets them
    node_env = {**replica_env, **inherited}
    base = args.log_dir or replica_env.get(settings.REPLICA_LOG_DIR) or "<log_dir>"
    run_id = plan.run_id or "<uuid4>"
    port = plan.master_port if plan.master_port is not None else "<free port>"
    out = []
    for lr in shown_local_ranks(plan.nproc, max_ranks):
        err = f"{base}/{run_id}_<rand>/attempt_0/{lr}/error.json"
        env = {**inherited, **worker_env(plan, lr, 0, port, run_id, err, node_env)}
        out.append(
            {
                "rank": plan.rank(lr),
                "local_rank": lr,
                "engine": AGENT,
                "argv": list(plan.command),
                "env": env,
            }
        )
    return out
