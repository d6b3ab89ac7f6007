"""Component resolution: a name -> a function -> command-line options -> an AppDef.

Public API (what the CLI calls)::

    comp = find_component("dist.ddp")            # or pkg.mod.fn, pkg.mod:fn, path/file.py:fn
    comp.description                             # first docstring line
    comp.help_text()                             # `trainlaunch run dist.ddp --help`
    app = comp.materialize(argv, defaults=cfg.component_defaults(comp.name))
    app = comp.call({"msg": "hi"}, defaults)     # programmatic: values by parameter name
    list_components()                            # [(name, description)], imports nothing

``materialize`` raises :class:`HelpRequested` for ``-h``/``--help`` and
:class:`~trainlaunch.errors.ComponentError` (one line + hint) for everything a user can get
wrong. Resolution order: :mod:`~trainlaunch.resolver.finder`; signature -> options:
:mod:`~trainlaunch.resolver.signature`; argv parsing and config defaults:
:mod:`~trainlaunch.resolver.arguments`; docs/components.md explains it all to users.
"""

from __future__ import annotations

import inspect

from trainlaunch.resolver.component import Component, HelpRequested
from trainlaunch.resolver.docstrings import first_line
from trainlaunch.resolver.finder import ENTRY_POINT_GROUP, list_components, resolve


def find_component(name: str, cwd: str | None = None) -> Component:
    """Resolve a component name (see module docs for the forms and their order)."""
    fn, origin = resolve(name, cwd)
    return Component(
        name=name, fn=fn, description=first_line(inspect.getdoc(inspect.unwrap(fn))), origin=origin
    )


__all__ = ["ENTRY_POINT_GROUP", "Component", "HelpRequested", "find_component", "list_components"]
