"""The scheduler registry: a literal map of backend name -> module, imported lazily.

Plugins add backends through the entry-point group ``trainlaunch.schedulers`` (each entry
point names a module exposing ``create_scheduler`` and, optionally, ``CAPABILITIES`` and
``SCHEDULER_PARAMS``). Adding a builtin backend is one line here.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

from trainlaunch.errors import SchedulerUnavailable, UsageError

if TYPE_CHECKING:  # annotations only: the registry imports no backend until one is used
    from trainlaunch.schedulers.capabilities import Capabilities

DEFAULT_SCHEDULER = "local"

BUILTIN_SCHEDULERS: dict[str, str] = {
    "local": "trainlaunch.schedulers.local.backend",
    "slurm": "trainlaunch.schedulers.slurm.backend",
    "kubernetes": "trainlaunch.schedulers.kubernetes.backend",
}
ALIASES = {"k8s": "kubernetes", "local_cwd": "local"}


def _plugin_modules() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group="trainlaunch.schedulers")}


def scheduler_names() -> list[str]:
    """Every backend name that can be used (builtins first)."""
    names = list(BUILTIN_SCHEDULERS)
    names += [n for n in sorted(_plugin_modules()) if n not in BUILTIN_SCHEDULERS]
    return names


def module_for(name: str) -> str:
    """The module path implementing scheduler name (UsageError if unknown)."""
    name = ALIASES.get(name, name)
    if name in BUILTIN_SCHEDULERS:
        return BUILTIN_SCHEDULERS[name]
    plugins = _plugin_modules()
    if name in plugins:
        return plugins[name]
    known = scheduler_names()
    import difflib  # only on a usage error

    close = difflib.get_close_matches(name, known + list(ALIASES), n=1)
    hint = f"did you mean {close[0]!r}?" if close else None
    raise UsageError(f"unknown scheduler {name!r}; available: {', '.join(known)}", hint=hint)


def canonical_name(name: str) -> str:
    """Resolve aliases (k8s -> kubernetes)."""
    module_for(name)
    return ALIASES.get(name, name)


def _module(name: str) -> ModuleType:
    path = module_for(name)
    try:
        module = importlib.import_module(path)
        module.create_scheduler  # noqa: B018 - a module without it is as broken as a failed import
    except Exception as e:  # noqa: BLE001 - a plugin's bug or missing dependency, named below
        raise SchedulerUnavailable(
            f"scheduler {name!r} cannot be loaded from {path}: {type(e).__name__}: {e}",
            hint="reinstall the package that provides it, or run with --debug for the traceback",
        ) from e
    return module


def accepted_params(name: str) -> frozenset[str] | None:
    """The create_scheduler params a backend declares (SCHEDULER_PARAMS; None: undeclared)."""
    declared = getattr(_module(name), "SCHEDULER_PARAMS", None)
    return frozenset(declared) if declared is not None else None


def capabilities_of(name: str) -> Capabilities:
    """What a backend declares it offers (CAPABILITIES; a plugin without one: nothing optional)."""
    from trainlaunch.schedulers.capabilities import Capabilities

    declared = getattr(_module(name), "CAPABILITIES", None)
    return declared if isinstance(declared, Capabilities) else Capabilities()


def with_capability(capability: str) -> list[str]:
    """The backends that offer one capability (e.g. "requeue"), in registry order; a backend
    that cannot be loaded here is left out."""
    able = []
    for name in scheduler_names():
        try:
            if getattr(capabilities_of(name), capability):
                able.append(name)
        except SchedulerUnavailable:
            continue
    return able


def get_scheduler(name: str, session_name: str, **params: Any) -> Any:
    """Import the backend module and create its scheduler (SchedulerUnavailable if it can't)."""
    return _module(name).create_scheduler(session_name, **params)
