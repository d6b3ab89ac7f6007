"""Where an app's metrics files are on this machine: the one rule `metrics` and every backend use.

The app's ranks got a metrics path at submission (``TRAINLAUNCH_METRICS_PATH``, recorded in the
AppDef's ``trainlaunch`` metadata or the rank settings the backend recorded). Read back here, ``${app_id}``
is filled in, ``~`` expanded and ``{rank}`` becomes ``*`` (a glob over every rank's file), and
a relative path is taken from the directory the ranks ran in, as they took it: the app's
working directory (``cwd``), or its place in the code snapshot the ranks ran from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from trainlaunch.errors import UsageError
from trainlaunch.specs import AppDef


def recorded_path(app_id: str, app: AppDef | None, settings: Mapping[str, Any]) -> str | None:
    """The metrics path the app's ranks got (``${app_id}`` filled, ``{rank}`` as ``*``)."""
    recorded: dict[str, Any] = {}
    if app is not None:
        recorded = dict(app.metadata.get("trainlaunch") or {})
    path = recorded.get("metrics_path") or settings.get("metrics_path")
    if not path:
        return None
    path = str(path)
    if "$" in path:  # a template to fill (string: imported only then)
        import string

        path = string.Template(path).safe_substitute(app_id=app_id)
    return os.path.expanduser(path).replace("{rank}", "*")


def ranks_cwd(snapshot: Mapping[str, Any] | None, cwd: str | None) -> str | None:
    """The directory the app's ranks ran in, when the backend recorded it: their place in the
    code snapshot (its record, schedulers/snapshot.py), else the app's working directory."""
    if isinstance(snapshot, Mapping) and isinstance(snapshot.get("path"), str):
        return os.path.join(snapshot["path"], str(snapshot.get("cwd_rel") or "."))
    return cwd if isinstance(cwd, str) and cwd else None


def metrics_path(
    app_id: str,
    app: AppDef | None,
    settings: Mapping[str, Any],
    snapshot: Mapping[str, Any] | None,
    cwd: str | None,
) -> str | None:
    """A dir, file or glob holding the app's metrics files, as its ranks wrote them (None: no
    path recorded); a relative one taken from the ranks' directory (as it was recorded when
    that is unknown). The arguments: a DescribeAppResponse's fields."""
    path = recorded_path(app_id, app, settings)
    cwd = ranks_cwd(snapshot, cwd)
    if path and not os.path.isabs(path) and cwd:
        slash = "/" if path.endswith("/") else ""  # a directory stays one
        path = os.path.normpath(os.path.join(cwd, path)) + slash
    return path


def require(app_id: str, path: str | None) -> str:
    """path, or a UsageError saying that the app recorded no metrics path."""
    if not path:
        raise UsageError(f"app {app_id} recorded no metrics path", hint="pass --path DIR_OR_GLOB")
    return path


__all__ = ["metrics_path", "ranks_cwd", "recorded_path", "require"]
