"""What each rank of a planned node agent will receive, added to a dry-run's notes."""

from __future__ import annotations

import dataclasses

from trainlaunch.specs import NODE_AGENT_ARGS, AppDryRunInfo

DRYRUN_RANKS_SHOWN = 4  # a node's rank plan in --dryrun: the first ranks and the last one
DRYRUN_PLANS_SHOWN = 3  # rank plans in --dryrun: of the first nodes and the last one


def with_rank_plans(info: AppDryRunInfo) -> AppDryRunInfo:
    """Add what each rank of a planned node agent will receive (the agent's own plan)."""
    agents = [r for r in info.replicas if r.node_agent]
    if not agents:
        return info
    from trainlaunch.agent.dryrun import rank_envs  # the agent plans; no backend imports it
    from trainlaunch.agent.plan import describe_nodes

    planned = {*range(DRYRUN_PLANS_SHOWN - 1), len(agents) - 1}  # a big app stays cheap
    notes = []
    for n, replica in enumerate(agents):
        if n not in planned:
            if n == DRYRUN_PLANS_SHOWN - 1:
                notes.append(
                    f"\n(rank plans of replicas {n}-{len(agents) - 2} left out: the same pattern)"
                )
            continue
        notes.append(f"\n[{replica.role}/{replica.replica_id} ranks]")
        agent_args = list(replica.cmd[1 + len(NODE_AGENT_ARGS) :])
        notes.append(f"  # {describe_nodes(agent_args, replica.env)}")
        ranks = rank_envs(agent_args, replica.env, max_ranks=DRYRUN_RANKS_SHOWN)
        for i, rank in enumerate(ranks):
            lr = rank.get("local_rank")
            if i and isinstance(lr, int) and lr - ranks[i - 1]["local_rank"] > 1:
                skipped = lr - ranks[i - 1]["local_rank"] - 1
                notes.append(
                    f"  ... {skipped} more ranks like these (local {lr - skipped}-{lr - 1})"
                )
            env = rank.get("env", {})
            notes.append(
                f"  rank {rank.get('rank')} (local {rank.get('local_rank')}): "
                + " ".join(f"{k}={v}" for k, v in sorted(env.items()))
            )
            if "argv" in rank:
                notes.append(f"    argv: {rank['argv']}")
    return dataclasses.replace(info, notes=(*info.notes, *notes))
