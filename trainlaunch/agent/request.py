"""What a submission asks of the node agents: the ``--preflight*`` flags (docs/preflight.md).

The runner applies :func:`with_preflight` to every app before its backend renders it, so the
flags are in each node agent's argv on every backend (``--dryrun`` shows them), and the
agent checks them again when it starts (:func:`check_preflight`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainlaunch.agent import flags
from trainlaunch.agent.plan import TORCHRUN, choose_engine
from trainlaunch.errors import UsageError
from trainlaunch.preflight.options import PreflightOptions
from trainlaunch.specs import NODE_AGENT_ARGS, AppDef, Role


def check_preflight(args: flags.AgentArgs, engine: str, reason: str) -> None:
    """UsageError unless the node agent itself can run these flags' preflight."""
    PreflightOptions.from_flags(args.values)
    if engine == TORCHRUN:
        raise UsageError(
            f"--preflight needs trainlaunch's own node agent, but this app runs torchrun ({reason})",
            hint="a static world (--nnodes N, --engine auto) can have a preflight; "
            "drop --preflight otherwise",
        )


def with_preflight(app: AppDef, cfg: Mapping[str, Any]) -> AppDef:
    """The app with the preflight flags in every node agent's argv, when cfg asks for it.

    Roles that are not node agents (no dist.ddp) are left as they are: there is no agent on
    their nodes to run it.
    """
    opts = PreflightOptions.from_cfg(cfg)
    if opts is None:
        return app
    rendered = tuple(flags.render(opts.flag_values()))

    def add(role: Role) -> Role:
        agent_args = role.agent_args
        if agent_args is None:
            return role
        args = flags.parse(agent_args, role.env)
        if args.preflight:  # asked for in the agent's own flags already
            return role
        engine, reason = choose_engine(args)
        check_preflight(args, engine, reason)
        return role.replace(args=(*NODE_AGENT_ARGS, *rendered, *agent_args))

    return app.map_roles(add)
