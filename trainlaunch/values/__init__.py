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

Nor does it import :mod:`dataclasses` (with ``inspect``, ~10 ms of an interpreter's start)
or run its class processing (~0.1 ms a class) for a class body without ``dataclasses.field``
and without a stdlib dataclass base: such a body is read here, and the dataclass records
(``__dataclass_fields__``, ``__dataclass_params__``) are made by the stdlib the first time
anything asks for them. The supervisor and the node agent start the app's processes without
dataclasses (bench/results/2026-12-07-launch).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from dataclasses import field as _dataclass_field
else:
    _dataclass_field = None  # dataclass_transform's, read by type checkers only

_T = TypeVar("_T")
_F = TypeVar("_F")

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
elif TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:  # Python 3.10 at run time: only type checkers read the marker

    def dataclass_transform(**_: Any) -> Callable[[_F], _F]:
        return lambda f: f


class _Missing:
    """No default (``dataclasses.MISSING`` once that module is there)."""

    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()
_RECORDS = ("__dataclass_fields__", "__dataclass_params__")
_FIELDS_OF = "__value_fields__"  # name -> (default, factory) of every field, inherited first


class _Plan:
    """What the shared methods need to know of one class, worked out once."""

    __slots__ = ("name", "params", "required", "by_name", "shown", "compared", "hashed")

    def __init__(self, cls: type, fields: list[tuple[str, Any, Any, bool, bool, bool | None]]):
        # fields: (name, default, factory, repr, compare, hash), in __init__'s order
        self.name = cls.__qualname__
        self.params = tuple((n, d, f) for n, d, f, *_ in fields)
        self.required = frozenset(n for n, d, f, *_ in fields if d is _MISSING and f is _MISSING)
        self.by_name = {f[0]: i for i, f in enumerate(fields)}
        self.shown = tuple(f[0] for f in fields if f[3])
        self.compared = tuple(f[0] for f in fields if f[4])
        self.hashed = tuple(f[0] for f in fields if (f[4] if f[5] is None else f[5]))


def _stdlib_fields(cls: type) -> list[tuple[str, Any, Any, bool, bool, bool | None]]:
    """The fields of a class the stdlib has made a dataclass (dataclasses is imported)."""
    import dataclasses

    for f in cls.__dataclass_fields__.values():  # type: ignore[attr-defined]
        # fields() leaves InitVar out; its type is the InitVar or, postponed, its text
        if not f.init or f.kw_only is True or "InitVar" in str(f.type):
            raise TypeError(f"@frozen does not take field {cls.__name__}.{f.name}: {f!r}")

    def plain(v: Any) -> Any:
        return _MISSING if v is dataclasses.MISSING else v

    return [
        (f.name, plain(f.default), plain(f.default_factory), f.repr, f.compare, f.hash)
        for f in dataclasses.fields(cls)
    ]


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):  # postponed (from __future__ import annotations)
        return annotation.replace(" ", "").startswith(("ClassVar", "typing.ClassVar"))
    typing = sys.modules["typing"]
    return annotation is typing.ClassVar or typing.get_origin(annotation) is typing.ClassVar


def _read_fields(cls: type) -> list[tuple[str, Any, Any, bool, bool, bool | None]] | None:
    """The fields of a plain class body (no ``dataclasses.field``, no stdlib dataclass base),
    as the stdlib would find them; None where only the stdlib can tell."""
    found: dict[str, Any] = {}
    for base in reversed(cls.__mro__[1:]):
        if _FIELDS_OF in base.__dict__:
            found.update(base.__dict__[_FIELDS_OF])
        elif "__dataclass_fields__" in base.__dict__:
            return None
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if "InitVar" in text or "KW_ONLY" in text:
            raise TypeError(f"@frozen does not take field {cls.__name__}.{name}: {text}")
        if _is_classvar(annotation):
            continue
        default = cls.__dict__.get(name, _MISSING)
        if type(default).__module__ == "dataclasses":  # a dataclasses.field(...)
            return None
        if default is not _MISSING and type(default).__hash__ is None:
            raise ValueError(  # the stdlib's words
                f"mutable default {type(default)} for field {name} is not allowed: "
                "use default_factory"
            )
        found[name] = default
    return [(n, d, _MISSING, True, True, None) for n, d in found.items()]


class _Record:
    """``__dataclass_fields__``/``__dataclass_params__`` of a class read by :func:`frozen`:
    the first time either is asked for, the stdlib makes both (as it would have at once)."""

    def __init__(self, name: str, home: type) -> None:
        self.name = name
        self.home = home

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        import dataclasses

        for name in _RECORDS:
            delattr(self.home, name)
        dataclasses.dataclass(init=False, repr=False, eq=False)(self.home)
        return getattr(self.home, self.name)


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
    import dataclasses

    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    import dataclasses

    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


_METHODS: dict[str, Callable[..., Any]] = {
    "__init__": _init,
    "__repr__": _repr,
    "__eq__": _eq,
    "__hash__": _hash,
    "__setattr__": _setattr,
    "__delattr__": _delattr,
}


@dataclass_transform(frozen_default=True, field_specifiers=(_dataclass_field,))
def frozen(cls: type[_T]) -> type[_T]:
    """Make cls a frozen dataclass (fields, defaults, factories, ``__post_init__``)."""
    for name in _METHODS:
        if name in cls.__dict__:
            raise TypeError(f"@frozen writes {cls.__name__}.{name}; define it without @frozen")
    fields = _read_fields(cls)
    if fields is None:  # the dataclass machinery without the methods it would compile
        import dataclasses

        cls = dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
        fields = _stdlib_fields(cls)
    else:  # read here; the stdlib makes its records when first asked (_Record)
        for name in _RECORDS:
            setattr(cls, name, _Record(name, cls))
        setattr(cls, "__match_args__", tuple(f[0] for f in fields))  # noqa: B010 (mypy)
        setattr(cls, _FIELDS_OF, {n: d for n, d, *_ in fields})
    cls.__value_plan__ = _Plan(cls, fields)  # type: ignore[attr-defined]
    for name, method in _METHODS.items():
        setattr(cls, name, method)
    return cls


__all__ = ["frozen"]
