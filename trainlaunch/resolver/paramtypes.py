"""Runtime parameter types -> how their command-line text and config values become values.

Supported (from ``typing.get_type_hints``, so aliases, re-exports and decorators are fine):
``str``, ``int``, ``float``, ``bool`` (a flag), ``Literal[...]`` and ``Enum`` (choices),
``Optional[T]`` / ``T | None``, ``list[T]`` / ``tuple[T, ...]`` (T scalar) and
``dict[K, V]`` (K, V scalar). Anything else is reported, never guessed.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

from trainlaunch.values import frozen

_TRUE = frozenset({"1", "true", "yes", "on", "y"})
_FALSE = frozenset({"0", "false", "no", "off", "n"})


class Unsupported(Exception):
    """The annotation cannot be expressed on a command line."""


@frozen
class Scalar:
    """One scalar type: its help label, a text parser and a typed-value checker."""

    label: str
    parse: Callable[[str], Any]  # command-line text -> value; ValueError says what was expected
    accept: Callable[[Any], Any]  # typed value (a config file's) -> value; ValueError likewise
    choices: tuple[str, ...] = ()


@frozen
class TypeInfo:
    """How one parameter is given: kind, element types and whether None is allowed."""

    kind: Literal["scalar", "flag", "list", "tuple", "dict"]
    item: Scalar  # the scalar, the list/tuple element, or the dict value
    key: Scalar | None = None  # dict keys
    optional: bool = False

    @property
    def metavar(self) -> str:
        """What the help text shows after the option name."""
        if self.kind == "flag":
            return ""
        if self.kind in ("list", "tuple"):
            return f"{self.item.label}[,{self.item.label}...]"
        if self.kind == "dict":
            assert self.key is not None
            if self.key.label == self.item.label == "STR":
                return "KEY=VALUE[,...]"
            return f"{self.key.label}={self.item.label}[,...]"
        return self.item.label

    @property
    def accumulates(self) -> bool:
        """Lists and dicts may be repeated on the command line; the values add up."""
        return self.kind in ("list", "tuple", "dict")

    def from_text(self, raw: str, acc: Any = None) -> Any:
        """Convert one command-line value (added to acc for lists and dicts)."""
        if self.kind == "flag":
            return _parse_bool(raw)
        if self.kind in ("list", "tuple"):
            items = [self.item.parse(x.strip()) for x in raw.split(",") if x.strip()]
            out = list(acc or ()) + items
            return tuple(out) if self.kind == "tuple" else out
        if self.kind == "dict":
            assert self.key is not None
            merged = dict(acc or {})
            for k, v in _split_pairs(raw):
                merged[self.key.parse(k)] = self.item.parse(v)
            return merged
        return self.item.parse(raw)

    def from_config(self, value: Any) -> Any:
        """Check and convert a typed value from a config file (text is parsed like argv)."""
        if value is None:
            if self.optional:
                return None
            raise ValueError("expected a value, got nothing")
        if self.kind == "flag":
            if isinstance(value, bool):
                return value
            if isinstance(value, str):
                return _parse_bool(value)
            raise ValueError(f"expected true or false, got {value!r}")
        if self.kind in ("list", "tuple"):
            if isinstance(value, str):
                return self.from_text(value)
            if not isinstance(value, (list, tuple)):
                raise ValueError(f"expected a list, got {value!r}")
            out = [self.item.accept(x) for x in value]
            return tuple(out) if self.kind == "tuple" else out
        if self.kind == "dict":
            assert self.key is not None
            if isinstance(value, str):
                return self.from_text(value)
            if not isinstance(value, Mapping):
                raise ValueError(f"expected a table of key = value, got {value!r}")
            return {self.key.accept(k): self.item.accept(v) for k, v in value.items()}
        return self.item.accept(value)


def _split_pairs(raw: str) -> list[tuple[str, str]]:
    """``k=v,k2=v2``; a segment without '=' continues the previous value (``P=a,b``)."""
    pairs: list[list[str]] = []
    for seg in raw.split(","):
        if "=" in seg:
            k, _, v = seg.partition("=")
            if not k.strip():
                raise ValueError(f"expected KEY=VALUE, got {seg!r}")
            pairs.append([k.strip(), v])
        elif pairs:
            pairs[-1][1] += "," + seg  # a value that itself contains commas
        elif seg.strip():
            raise ValueError(f"expected KEY=VALUE, got {seg!r}")
    return [(k, v) for k, v in pairs]


def _parse_bool(raw: str) -> bool:
    low = raw.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


def _parse_int(raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {raw!r}") from None


def _parse_float(raw: str) -> float:
    try:
        return float(raw.strip())
    except ValueError:
        raise ValueError(f"expected a number, got {raw!r}") from None


def _accept_str(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)  # `port = 8080` for a str parameter is what the user meant
    raise ValueError(f"expected a string, got {v!r}")


def _accept_int(v: Any) -> int:
    if isinstance(v, str):
        return _parse_int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"expected an integer, got {v!r}")
    return v


def _accept_float(v: Any) -> float:
    if isinstance(v, str):
        return _parse_float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"expected a number, got {v!r}")
    return float(v)


def _accept_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        return _parse_bool(v)
    raise ValueError(f"expected true or false, got {v!r}")


_BASIC: dict[type, Scalar] = {
    str: Scalar("STR", lambda s: s, _accept_str),
    int: Scalar("INT", _parse_int, _accept_int),
    float: Scalar("FLOAT", _parse_float, _accept_float),
    bool: Scalar("BOOL", _parse_bool, _accept_bool),
}


def _literal(values: tuple[Any, ...]) -> Scalar:
    for v in values:
        if not isinstance(v, (str, int, bool)) or isinstance(v, enum.Enum):
            raise Unsupported(f"Literal values must be str, int or bool, got {v!r}")
    by_text = {str(v): v for v in values}
    names = tuple(by_text)

    def parse(raw: str) -> Any:
        if raw in by_text:
            return by_text[raw]
        raise ValueError(f"expected one of {', '.join(names)}, got {raw!r}")

    def accept(v: Any) -> Any:
        for c in values:
            if type(c) is type(v) and c == v:  # type check: True must not match 1
                return c
        if isinstance(v, str):
            return parse(v)
        raise ValueError(f"expected one of {', '.join(names)}, got {v!r}")

    return Scalar("{" + ",".join(names) + "}", parse, accept, names)


def _enum(cls: type[enum.Enum]) -> Scalar:
    members = list(cls)
    names = tuple(m.name for m in members)

    def parse(raw: str) -> Any:
        for m in members:  # by name first (what help shows), then by value
            if m.name == raw or m.name.lower() == raw.lower():
                return m
        for m in members:
            if str(m.value) == raw:
                return m
        raise ValueError(f"expected one of {', '.join(names)}, got {raw!r}")

    def accept(v: Any) -> Any:
        if isinstance(v, cls):
            return v
        if isinstance(v, (str, int, float)) and not isinstance(v, bool):
            return parse(str(v))
        raise ValueError(f"expected one of {', '.join(names)}, got {v!r}")

    return Scalar("{" + ",".join(names) + "}", parse, accept, names)


def scalar_for(tp: Any) -> Scalar:
    """The Scalar for a scalar annotation, or Unsupported."""
    if tp in _BASIC:
        return _BASIC[tp]
    if typing.get_origin(tp) is Literal:
        return _literal(typing.get_args(tp))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp)
    raise Unsupported(type_name(tp))


def type_info(tp: Any) -> TypeInfo:
    """Analyse one parameter annotation (raises Unsupported with the offending type)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Union or origin is types.UnionType:
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1 or len(rest) == len(args):
            raise Unsupported(type_name(tp))
        return dataclasses.replace(type_info(rest[0]), optional=True)
    if tp is bool:
        return TypeInfo("flag", _BASIC[bool])
    if tp is list or origin is list or tp is typing.List:  # noqa: UP006 (bare typing.List)
        return TypeInfo("list", _elem(args, tp))
    if tp is tuple or origin is tuple:
        if args and not (len(args) == 2 and args[1] is Ellipsis):
            raise Unsupported(f"{type_name(tp)} (use tuple[T, ...])")
        return TypeInfo("tuple", _elem(args[:1], tp))
    if tp is dict or origin is dict:
        if args:
            return TypeInfo("dict", _elem(args[1:], tp), key=_elem(args[:1], tp))
        return TypeInfo("dict", _BASIC[str], key=_BASIC[str])
    return TypeInfo("scalar", scalar_for(tp))


def _elem(args: tuple[Any, ...], whole: Any) -> Scalar:
    if not args:
        return _BASIC[str]
    try:
        return scalar_for(args[0])
    except Unsupported:
        raise Unsupported(type_name(whole)) from None


def type_name(tp: Any) -> str:
    """Readable name of an annotation for error messages."""
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return repr(tp).replace("typing.", "")


SUPPORTED = (
    "str, int, float, bool, Literal[...], Enum, Optional[T] / T | None, list[T], "
    "tuple[T, ...], dict[K, V] (T, K, V scalar)"
)
