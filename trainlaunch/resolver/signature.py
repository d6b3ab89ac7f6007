"""A component's signature as command-line options (the Spec), read from the real function.

* parameter ``foo_bar`` -> ``--foo-bar`` (``--foo_bar`` also accepted); one-letter names also
  get ``-x``, except ``-h``, which is always help; ``bool`` -> ``--flag`` / ``--no-flag``.
* a module-level ``ALIASES = {"nproc": "nproc_per_node"}`` adds option names.
* types come from ``typing.get_type_hints`` of the unwrapped function (decorators are fine);
  unannotated parameters take their default's type, else str; ``**kwargs`` is rejected.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
from collections.abc import Callable, Mapping
from typing import Any

from trainlaunch.errors import ComponentError
from trainlaunch.resolver.docstrings import parse_docstring
from trainlaunch.resolver.paramtypes import (
    SUPPORTED,
    Scalar,
    TypeInfo,
    Unsupported,
    scalar_for,
    type_info,
    type_name,
)
from trainlaunch.values import frozen

REQUIRED: Any = inspect.Parameter.empty
_P = inspect.Parameter


@frozen
class Option:
    """One keyword parameter of a component, as a command-line option."""

    param: str
    names: tuple[str, ...]  # shown in help: canonical first ("--foo-bar", "-f", aliases)
    info: TypeInfo
    default: Any  # REQUIRED when the parameter has no default
    help: str

    @property
    def required(self) -> bool:
        """True when neither a default nor the command line supplies a value."""
        return self.default is REQUIRED

    @property
    def flag(self) -> str:
        """The canonical spelling, used in messages."""
        return self.names[0]


@frozen
class VarArgs:
    """The component's ``*args`` parameter."""

    param: str
    item: Scalar
    help: str


@frozen
class Spec:
    """Everything needed to parse a component's command line and call it."""

    component: str
    options: tuple[Option, ...]
    varargs: VarArgs | None
    lookup: Mapping[str, tuple[Option, bool]]  # every spelling -> (option, is "--no-x")
    order: tuple[tuple[str, Any], ...]  # (parameter, kind) in signature order
    description: str

    def option(self, param: str) -> Option:
        """The option for a parameter name."""
        return next(o for o in self.options if o.param == param)


_specs: dict[tuple[str, Callable[..., Any]], Spec] = {}  # a sweep builds one per point


def build_spec(component: str, fn: Callable[..., Any]) -> Spec:
    """Read fn's signature, runtime type hints, docstring and module ALIASES (once per
    function: a Spec is a frozen value of them)."""
    key = (component, fn)
    spec = _specs.get(key)
    if spec is None:
        if len(_specs) >= 256:  # a file component loaded again is a new function: bounded
            _specs.clear()
        spec = _specs[key] = _build_spec(component, fn)
    return spec


def _build_spec(component: str, fn: Callable[..., Any]) -> Spec:
    target = inspect.unwrap(fn)  # decorated components: read the real function's hints and doc
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise ComponentError(f"component {component!r}: cannot read its signature: {e}") from e
    hints = _hints(component, target)
    description, doc_params = parse_docstring(inspect.getdoc(target))
    options: list[Option] = []
    varargs: VarArgs | None = None
    lookup: dict[str, tuple[Option, bool]] = {}
    for p in sig.parameters.values():
        ann = hints.get(p.name, p.annotation)
        if p.kind is _P.VAR_KEYWORD:
            raise ComponentError(
                f"component {component!r} takes **{p.name}, which has no command-line form",
                hint="declare each option as its own parameter",
            )
        if p.kind is _P.VAR_POSITIONAL:
            varargs = VarArgs(
                p.name, _vararg_item(component, p.name, ann), doc_params.get(p.name, "")
            )
            continue
        if p.name == "help":
            raise ComponentError(
                f"component {component!r}: a parameter named 'help' clashes with --help",
                hint="rename the parameter",
            )
        options.append(_option(component, p, ann, doc_params.get(p.name, "")))
    for opt in options:  # negations first, so a real parameter named no_x keeps --no-x
        if opt.info.kind == "flag":
            for long in _long_names(opt.param):
                lookup["--no-" + long] = (opt, True)
                lookup["--no_" + long] = (opt, True)
    for opt in options:
        for spelling in _spellings(opt.param):
            lookup[spelling] = (opt, False)
    options = _add_aliases(component, target, options, lookup)
    order = tuple((p.name, p.kind) for p in sig.parameters.values())
    return Spec(component, tuple(options), varargs, lookup, order, description)


def _hints(component: str, target: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(target)
    except TypeError:
        return {}  # not a plain function (a callable object): fall back to raw annotations
    except Exception as e:  # a NameError from a forward reference, a bad annotation, ...
        raise ComponentError(
            f"component {component!r}: cannot evaluate its type annotations: "
            f"{type(e).__name__}: {e}"
        ) from e


def _infer(p: inspect.Parameter) -> Any:
    """An unannotated parameter takes its default's type, else str."""
    if p.default is not REQUIRED and type(p.default) in (str, int, float, bool):
        return type(p.default)
    return str


def _option(component: str, p: inspect.Parameter, ann: Any, help_text: str) -> Option:
    tp = _infer(p) if ann is REQUIRED else ann
    try:
        info = type_info(tp)
    except Unsupported as e:
        raise ComponentError(
            f"component {component!r}: parameter {p.name!r} has unsupported type {e}",
            hint=f"supported types: {SUPPORTED}",
        ) from None
    if p.default is None and not info.optional:
        info = dataclasses.replace(info, optional=True)  # `x: int = None` means Optional
    names = ["--" + p.name.replace("_", "-")]
    if len(p.name) == 1 and p.name != "h":
        names.append("-" + p.name)
    return Option(p.name, tuple(names), info, p.default, help_text)


def _vararg_item(component: str, param: str, ann: Any) -> Scalar:
    if ann is REQUIRED:
        return scalar_for(str)
    try:
        return scalar_for(ann)
    except Unsupported:
        raise ComponentError(
            f"component {component!r}: *{param} has unsupported type {type_name(ann)}",
            hint="use str, int or float",
        ) from None


def _long_names(name: str) -> list[str]:
    return list(dict.fromkeys([name.replace("_", "-"), name]))


def _spellings(name: str) -> list[str]:
    out = ["--" + n for n in _long_names(name)]
    if len(name) == 1 and name != "h":
        out.append("-" + name)
    return out


def _add_aliases(
    component: str, target: Any, options: list[Option], lookup: dict[str, tuple[Option, bool]]
) -> list[Option]:
    """Apply the module's ALIASES (extra option name -> parameter name)."""
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    aliases = getattr(module, "ALIASES", None)
    if not isinstance(aliases, Mapping):
        return options
    by_param = {o.param: o for o in options}
    extra: dict[str, list[str]] = {}
    for alias, param in aliases.items():
        if param not in by_param:
            continue  # module-wide table: this alias belongs to another component
        alias = str(alias).lstrip("-")
        for spelling in _spellings(alias) if alias != "h" else []:
            owner = lookup.get(spelling)
            if owner is not None and owner[0].param != param:
                raise ComponentError(
                    f"component {component!r}: alias {spelling} for "
                    f"{param!r} clashes with {owner[0].flag}"
                )
            lookup[spelling] = (by_param[param], False)
        extra.setdefault(param, []).append(
            ("-" if len(alias) == 1 else "--") + alias.replace("_", "-")
        )
    if not extra:
        return options
    out = []
    for o in options:
        new = dataclasses.replace(o, names=o.names + tuple(extra.get(o.param, ())))
        for spelling, (holder, neg) in list(lookup.items()):
            if holder is o:
                lookup[spelling] = (new, neg)
        out.append(new)
    return out
