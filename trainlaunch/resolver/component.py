"""A resolved component: its help text, and argv (+ config defaults) -> a validated AppDef."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trainlaunch.errors import ComponentError, UsageError
from trainlaunch.resolver.arguments import (
    Parsed,
    call,
    parse_argv,
    parse_mapping,
    resolve_values,
)
from trainlaunch.resolver.helptext import render_help
from trainlaunch.resolver.signature import Spec, build_spec
from trainlaunch.specs import AppDef
from trainlaunch.values import frozen


class HelpRequested(Exception):
    """argv asked for ``-h``/``--help``; ``.text`` is the component's help text."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


@frozen
class Component:
    """A resolved component: the name as typed, its function, and where it came from."""

    name: str
    fn: Callable[..., AppDef]
    description: str  # the docstring's first line
    origin: str = ""  # "builtin", "entry point m:f", "module m", "file /abs/path.py"

    def spec(self) -> Spec:
        """The command-line options derived from the function's signature."""
        return build_spec(self.name, self.fn)

    def help_text(self) -> str:
        """The full ``trainlaunch run NAME --help`` text."""
        return render_help(self.spec())

    def materialize(self, argv: Sequence[str], defaults: Mapping[str, Any] | None = None) -> AppDef:
        """Parse argv, fill what it leaves out from defaults (config), call, check the AppDef."""
        spec = self.spec()
        parsed = parse_argv(spec, _apply_grammar(self.fn, spec, argv))
        if parsed.help:
            raise HelpRequested(render_help(spec))
        return self._build(spec, parsed, defaults)

    def call(self, kwargs: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> AppDef:
        """Programmatic use: values by parameter name (checked like config), then defaults."""
        spec = self.spec()
        return self._build(spec, parse_mapping(spec, kwargs), defaults)

    def _build(self, spec: Spec, parsed: Parsed, defaults: Mapping[str, Any] | None) -> AppDef:
        values, varargs = resolve_values(spec, parsed, defaults)
        try:
            app = call(spec, self.fn, values, varargs)
        except UsageError as e:  # e.g. an invalid Role built from a bad argument value
            raise ComponentError(f"component {self.name!r}: {e.message}", hint=e.hint) from e
        except (Exception, SystemExit) as e:  # the component's own code: a user error, not ours
            msg = (str(e).strip().splitlines() or [""])[0]
            raise ComponentError(
                f"component {self.name!r} raised {type(e).__name__}: {msg}",
                hint="rerun with --debug for the traceback",
            ) from e
        if not isinstance(app, AppDef):
            shown = repr(app)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise ComponentError(
                f"component {self.name!r} returned {type(app).__name__} {shown}, not an AppDef",
                hint="a component function must return trainlaunch.specs.AppDef",
            )
        return app


def _apply_grammar(fn: Callable[..., Any], spec: Spec, argv: Sequence[str]) -> list[str]:
    """The module's ``ARGV_GRAMMAR[function]`` rewrites argv first (dist.ddp: torchrun's)."""
    target = inspect.unwrap(fn)
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    table = getattr(module, "ARGV_GRAMMAR", None)
    grammar = table.get(getattr(target, "__name__", "")) if isinstance(table, Mapping) else None
    if grammar is None:
        return list(argv)
    options = {s: o.param for s, (o, _) in spec.lookup.items()}
    takes_value = {s for s, (o, _) in spec.lookup.items() if o.info.kind != "flag"}
    try:
        return list(grammar(list(argv), options, takes_value))
    except UsageError as e:
        raise ComponentError(e.message, hint=e.hint) from None
