"""trainlaunch: launch PyTorch training on local, Slurm and Kubernetes backends.

The public API (imports nothing heavy)::

    from trainlaunch import get_runner, AppDef, Role, Resource
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of the CLI's start, before its signal handlers exist
    from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "get_runner": "trainlaunch.runner",
    "Runner": "trainlaunch.runner",
    "AppDef": "trainlaunch.specs",
    "Role": "trainlaunch.specs",
    "Resource": "trainlaunch.specs",
    "RetryPolicy": "trainlaunch.specs",
    "AppState": "trainlaunch.specs",
    "AppStatus": "trainlaunch.specs",
    "AppDryRunInfo": "trainlaunch.specs",
    "macros": "trainlaunch.specs",
    "runopts": "trainlaunch.specs",
    "RankSettings": "trainlaunch.settings",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'trainlaunch' has no attribute {name!r}")


__all__ = sorted(_LAZY)
