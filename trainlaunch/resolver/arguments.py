"""Parse a component's command line against its Spec, merge config defaults, call it.

* ``*args`` takes the first positional token and everything after it, verbatim; a ``--``
  before that ends the options explicitly.
* an option that takes a value always consumes the next token (``--lr -0.1`` works).
* lists and dicts may repeat; any other option given twice is an error.
* config defaults fill only what the command line did not give (TorchX #1389).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trainlaunch.errors import ComponentError
from trainlaunch.resolver.signature import Option, Spec, VarArgs
from trainlaunch.values import frozen

HELP_FLAGS = ("-h", "--help")
_P = inspect.Parameter


@frozen
class Parsed:
    """The result of parsing argv: values given, positional rest, or a help request."""

    values: dict[str, Any]
    varargs: list[Any] | None
    help: bool = False


def parse_argv(spec: Spec, argv: Sequence[str]) -> Parsed:
    """Parse the component's part of the command line."""
    values: dict[str, Any] = {}
    rest: list[str] | None = None
    argv = list(argv)
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            rest = argv[i + 1 :]
            break
        if tok in HELP_FLAGS:
            return Parsed({}, None, help=True)
        if not tok.startswith("-") or tok == "-":
            rest = argv[i:]
            break
        name, eq, inline = tok.partition("=")
        if name not in spec.lookup and not tok.startswith("--") and len(tok) > 2:
            name, eq, inline = tok[:2], "=", tok[2:]  # attached short value: -j1x8
        entry = spec.lookup.get(name)
        if entry is None:
            raise _unknown(spec, name)
        opt, negated = entry
        if opt.info.kind == "flag":
            if eq and negated:
                raise ComponentError(f"option {name} takes no value, got {tok!r}")
            value: Any = _convert(spec, opt, name, inline, None) if eq else not negated
            i += 1
        else:
            if eq:
                raw, i = inline, i + 1
            elif i + 1 < len(argv):
                raw, i = argv[i + 1], i + 2
            else:
                raise ComponentError(
                    f"option {name} needs a value ({opt.info.metavar})",
                    hint=f"trainlaunch run {spec.component} --help",
                )
            value = _convert(spec, opt, name, raw, values.get(opt.param))
        if opt.param in values and not opt.info.accumulates:
            raise ComponentError(f"option {opt.flag} given more than once")
        values[opt.param] = value
    return Parsed(values, _positional(spec, rest))


def _convert(spec: Spec, opt: Option, name: str, raw: str, acc: Any) -> Any:
    try:
        return opt.info.from_text(raw, acc)
    except ValueError as e:
        raise ComponentError(
            f"bad value for {name} of component {spec.component!r}: {e}", hint=_help_hint(spec)
        ) from None


def _positional(spec: Spec, rest: list[str] | None) -> list[Any] | None:
    if rest is None:
        return None
    va = spec.varargs
    if va is None:
        if not rest:
            return None
        raise ComponentError(
            f"component {spec.component!r} takes no positional arguments, got {rest[0]!r}",
            hint=_help_hint(spec),
        )
    try:
        return [va.item.parse(x) for x in rest]
    except ValueError as e:
        raise ComponentError(
            f"bad value for *{va.param} of component {spec.component!r}: {e}"
        ) from None


def _unknown(spec: Spec, name: str) -> ComponentError:
    import difflib  # only on a usage error

    close = difflib.get_close_matches(name, list(spec.lookup), n=1)
    hint = (
        f"did you mean {close[0]}? "
        if close
        else ("options of `trainlaunch run` itself go before the component name; ")
    )
    if spec.varargs is not None and not close:
        hint = "arguments meant for the program (e.g. the training script) go after `--`; " + hint
    return ComponentError(
        f"unknown option {name} for component {spec.component!r}", hint=hint + _help_hint(spec)
    )


def _help_hint(spec: Spec) -> str:
    return f"see: trainlaunch run {spec.component} --help"


def _lookup_key(spec: Spec, key: str, source: str) -> Option | VarArgs:
    """A parameter or option name given by config or by keyword (any accepted spelling)."""
    va = spec.varargs
    if va is not None and key.lstrip("*") == va.param:
        return va
    bare = key.lstrip("-")
    entry = spec.lookup.get("--" + bare) or spec.lookup.get("-" + bare)
    if entry is None or entry[1]:
        valid = ", ".join(o.param for o in spec.options)
        raise ComponentError(
            f"{source} sets unknown option {key!r} for component {spec.component!r}",
            hint=f"its options: {valid}",
        )
    return entry[0]


def parse_mapping(spec: Spec, kwargs: Mapping[str, Any]) -> Parsed:
    """Programmatic arguments: Python values (or their text) by parameter name."""
    values: dict[str, Any] = {}
    varargs: list[Any] | None = None
    for key, value in kwargs.items():
        target = _lookup_key(spec, key, "the call")
        if isinstance(target, VarArgs):
            varargs = _config_varargs(spec, target, value, "argument")
            continue
        if target.param in values:
            raise ComponentError(
                f"{target.param!r} of component {spec.component!r} given twice (under two names)"
            )
        try:
            values[target.param] = target.info.from_config(value)
        except ValueError as e:
            raise ComponentError(
                f"bad value {key}={value!r} for component {spec.component!r}: {e}"
            ) from None
    return Parsed(values, varargs)


def resolve_values(
    spec: Spec, parsed: Parsed, defaults: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[Any] | None]:
    """Command-line values, then config defaults for what was not given; check required."""
    values = dict(parsed.values)
    varargs = parsed.varargs
    from_config: set[str] = set()
    for key, value in (defaults or {}).items():
        target = _lookup_key(spec, key, "config")
        if isinstance(target, VarArgs):
            if varargs is None:  # positional defaults only when none were typed
                varargs = _config_varargs(spec, target, value, "config default")
            continue
        if target.param in from_config:
            raise ComponentError(
                f"config sets {target.param!r} of component "
                f"{spec.component!r} twice (under two names)"
            )
        from_config.add(target.param)
        if target.param in values:
            continue  # an explicit command-line value always wins over config (TorchX #1389)
        try:
            values[target.param] = target.info.from_config(value)
        except ValueError as e:
            raise ComponentError(
                f"bad config default {key} = {value!r} for component {spec.component!r}: {e}"
            ) from None
    missing = [o.flag for o in spec.options if o.required and o.param not in values]
    if missing:
        raise ComponentError(
            f"component {spec.component!r} needs {', '.join(missing)}",
            hint=f"e.g. trainlaunch run {spec.component} {missing[0]} VALUE; {_help_hint(spec)}",
        )
    return values, varargs


def _config_varargs(spec: Spec, va: VarArgs, value: Any, what: str) -> list[Any]:
    items = value if isinstance(value, (list, tuple)) else None
    try:
        if items is None:
            raise ValueError(f"expected a list, got {value!r}")
        return [va.item.accept(x) for x in items]
    except ValueError as e:
        raise ComponentError(
            f"bad {what} {va.param} for component {spec.component!r}: {e}"
        ) from None


def call(
    spec: Spec, fn: Callable[..., Any], values: Mapping[str, Any], varargs: Sequence[Any] | None
) -> Any:
    """Call fn: parameters before ``*args`` positionally (Python requires it), the rest by name."""
    has_varargs = spec.varargs is not None
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for param, kind in spec.order:
        if kind is _P.VAR_POSITIONAL:
            args.extend(varargs or ())
        elif kind is _P.POSITIONAL_ONLY or (kind is _P.POSITIONAL_OR_KEYWORD and has_varargs):
            args.append(values.get(param, spec.option(param).default))
        elif param in values:
            kwargs[param] = values[param]
    return fn(*args, **kwargs)
