"""The Runner (TorchX's API): component -> AppDef -> dryrun -> schedule, and queries by handle.

Usage::

    with get_runner() as runner:
        handle = runner.run_component("utils.echo", ["--msg", "hi"], scheduler="local")
        print(runner.wait(handle).state)

``api`` holds the Runner; ``cfg`` the one assembly of a backend's options; ``polling`` the one
polling rule and ``outcome`` the one exit-code rule, for one app and for a sweep's many;
``plans`` the node agents' rank plans a dry-run shows. docs/python-api.md documents the API.
"""

from __future__ import annotations

from trainlaunch.runner.api import Runner, get_runner, macros
from trainlaunch.runner.cfg import CfgRequest
from trainlaunch.runner.polling import POLL_FIRST_INTERVAL, POLL_MAX_INTERVAL, last_of

__all__ = [
    "POLL_FIRST_INTERVAL",
    "POLL_MAX_INTERVAL",
    "CfgRequest",
    "Runner",
    "get_runner",
    "last_of",
    "macros",
]
