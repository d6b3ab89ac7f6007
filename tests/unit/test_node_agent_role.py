"""Requests describe themselves: Role.node_agent instead of sniffing argv."""

from __future__ import annotations

import pytest

from trainlaunch.errors import UsageError
from trainlaunch.resolver import find_component
from trainlaunch.specs import NODE_AGENT_ARGS, AppDef, Role


def test_dist_ddp_marks_its_role_and_the_flag_round_trips() -> None:
    app = find_component("dist.ddp").materialize(["--nproc-per-node", "2", "t.py"])
    role = app.roles[0]
    assert role.node_agent and role.args[:2] == NODE_AGENT_ARGS
    assert role.agent_args == role.args[2:]
    assert AppDef.from_dict(app.to_dict()) == app
    echo = find_component("utils.echo").materialize([]).roles[0]
    assert not echo.node_agent and echo.agent_args is None
    assert "node_agent" not in echo.to_dict()  # other records keep their shape


def test_a_node_agent_role_must_run_the_agent() -> None:
    with pytest.raises(UsageError, match="node_agent role's args start with -m trainlaunch.agent"):
        Role("r", "python", ("train.py",), node_agent=True)
    # argv that merely looks like the agent does not make a role one
    assert not Role("r", "python", NODE_AGENT_ARGS).node_agent
