"""``@frozen``: a frozen dataclass whose methods are made without compiling code at import.

``@dataclasses.dataclass(frozen=True)`` writes ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__`` as source text and compiles each with
``exec`` when the class is created: ~5 million instructions (~0.5 ms) per class on Python
3.11, and the ~30 value classes on the path of ``trainlaunch run`` made that 40% of the
command's CPU (bench/results/2026-12-07-run). ``@frozen`` keeps everything a dataclass is to
its users (``dataclasses.fields``, ``replace``, ``asdict``, ``FrozenInstanceError``,
``__match_args__``, mypy's view through ``dataclass_transform``) and shares one set of
precompiled methods among all classes, driven by each class's fields.

What it does not take: ``order``, ``kw_only``, ``slots``, ``InitVar`` and ``init=False``
fields (use ``dataclasses.dataclass`` where a class needs them).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

_T = TypeVar("_T")
_F = TypeVar("_F")

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
elif TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:  # Python 3.10 at run time: only type checkers read the marker

    def dataclass_transform(**_: Any) -> Callable[[_F], _F]:
        return lambda f: f


_MISSING = dataclasses.MISSING


class _Plan:
    """What the shared methods need to know of one class, worked out once."""

    __slots__ = ("name", "params", "required", "by_name", "shown", "compared", "hashed")

    def __init__(self, cls: type) -> None:
        fields = dataclasses.fields(cls)
        for f in cls.__dataclass_fields__.values():  # type: ignore[attr-defined]
            # fields() leaves InitVar out; its type is the InitVar or, postponed, its text
            if not f.init or f.kw_only or "InitVar" in str(f.type):
                raise TypeError(f"@frozen does not take field {cls.__name__}.{f.name}: {f!r}")
        self.name = cls.__qualname__
        self.params = tuple((f.name, f.default, f.default_factory) for f in fields)
        self.required = frozenset(f.name for f in fields if _required(f))
        self.by_name = {f.name: i for i, f in enumerate(fields)}
        self.shown = tuple(f.name for f in fields if f.repr)
        self.compared = tuple(f.name for f in fields if f.compare)
        self.hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is _MISSING and f.default_factory is _MISSING


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    plan: _Plan = self.__value_plan__
    params = plan.params
    if len(args) > len(params):
        raise TypeError(
            f"{plan.name}() takes {len(params)} positional arguments but {len(args)} were given"
        )
    for key in kwargs:
        if key not in plan.by_name:
            raise TypeError(f"{plan.name}() got an unexpected keyword argument {key!r}")
        if plan.by_name[key] < len(args):
            raise TypeError(f"{plan.name}() got multiple values for argument {key!r}")
    missing = [n for n in plan.required if plan.by_name[n] >= len(args) and n not in kwargs]
    if missing:
        names = ", ".join(repr(n) for n in sorted(missing, key=plan.by_name.__getitem__))
        raise TypeError(f"{plan.name}() missing required arguments: {names}")
    put = object.__setattr__
    for i, (name, default, factory) in enumerate(params):
        if i < len(args):
            put(self, name, args[i])
        elif name in kwargs:
            put(self, name, kwargs[name])
        else:
            put(self, name, default if factory is _MISSING else factory())
    post = getattr(self, "__post_init__", None)
    if post is not None:
        post()


def _repr(self: Any) -> str:
    plan: _Plan = self.__value_plan__
    shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in plan.shown)
    return f"{plan.name}({shown})"


def _key(self: Any, names: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(getattr(self, n) for n in names)


def _eq(self: Any, other: Any) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = self.__value_plan__.compared
    return _key(self, names) == _key(other, names)


def _hash(self: Any) -> int:
    return hash(_key(self, self.__value_plan__.hashed))


def _setattr(self: Any, name: str, _value: Any) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


_METHODS: dict[str, Callable[..., Any]] = {
    "__init__": _init,
    "__repr__": _repr,
    "__eq__": _eq,
    "__hash__": _hash,
    "__setattr__": _setattr,
    "__delattr__": _delattr,
}


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def frozen(cls: type[_T]) -> type[_T]:
    """Make cls a frozen dataclass (fields, defaults, factories, ``__post_init__``)."""
    # the dataclass machinery without the methods it would compile: fields, __match_args__
    for name in _METHODS:
        if name in cls.__dict__:
            raise TypeError(f"@frozen writes {cls.__name__}.{name}; define it without @frozen")
    cls = dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    cls.__value_plan__ = _Plan(cls)  # type: ignore[attr-defined]
    for name, method in _METHODS.items():
        setattr(cls, name, method)
    return cls


__all__ = ["frozen"]
