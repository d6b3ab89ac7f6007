"""Typed scheduler options (runopts): a schema per backend, strict resolution.

An unknown key is an error that lists the valid ones (TorchX silently ignores them).
``--cfg`` syntax: ``key=value`` pairs separated by ``,``; list values separate items with
``;``; dict values are ``k:v`` items separated by ``;``. Double or single quotes protect
separators inside a value.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Union

from trainlaunch.errors import UsageError
from trainlaunch.values import frozen

CfgVal = Union[str, int, float, bool, list[str], dict[str, str], None]  # noqa: UP007 (3.10 runtime alias)
_TYPES = {
    str: "str",
    int: "int",
    float: "float",
    bool: "bool",
    list: "list[str]",
    dict: "dict[str, str]",
}
_TRUE = {"1", "true", "yes", "on", "y"}
_FALSE = {"0", "false", "no", "off", "n"}


@frozen
class runopt:  # noqa: N801 (TorchX's spelling)
    """One typed option of a scheduler."""

    default: CfgVal
    opt_type: type
    is_required: bool
    help: str
    check: Callable[[Any], str | None] | None = None  # why a typed value is refused, or None
    choices: tuple[str, ...] = ()  # the only values allowed, when they are few

    @property
    def type_name(self) -> str:
        """Human name of the option type."""
        return _TYPES[self.opt_type]


class runopts:  # noqa: N801
    """The option schema of one scheduler."""

    def __init__(self) -> None:
        self._opts: dict[str, runopt] = {}

    def add(
        self,
        key: str,
        type_: type,
        help: str,
        default: CfgVal = None,
        required: bool = False,
        check: Callable[[Any], str | None] | None = None,
        choices: tuple[str, ...] = (),
    ) -> None:
        """Declare an option; check(value) says why a well-typed value is refused, or None;
        choices, if given, are the only values allowed (shown by `trainlaunch runopts`)."""
        if type_ not in _TYPES:
            raise TypeError(f"unsupported runopt type {type_!r}")
        if choices and (default is not None and default not in choices):
            raise TypeError(f"runopt {key!r}: default {default!r} is not one of its choices")
        self._opts[key] = runopt(default, type_, required, help, check, tuple(choices))

    def __iter__(self) -> Iterator[tuple[str, runopt]]:
        return iter(sorted(self._opts.items()))

    def __contains__(self, key: object) -> bool:
        return key in self._opts

    def get(self, key: str) -> runopt | None:
        """The option named key, or None."""
        return self._opts.get(key)

    def check(self, cfg: Mapping[str, Any], scheduler: str = "") -> dict[str, CfgVal]:
        """Check types and reject unknown keys of the options given (one layer of them: no
        defaults filled, nothing required)."""
        where = f" for scheduler {scheduler!r}" if scheduler else ""
        out: dict[str, CfgVal] = {}
        for key, value in cfg.items():
            opt = self._opts.get(key)
            if opt is None:
                raise UsageError(self._unknown(key, where))
            out[key] = value if value is None else _checked(key, opt, _coerce(key, opt, value))
        return out

    def resolve(self, cfg: Mapping[str, Any], scheduler: str = "") -> dict[str, CfgVal]:
        """Check types, reject unknown keys, fill defaults."""
        where = f" for scheduler {scheduler!r}" if scheduler else ""
        out = self.check(cfg, scheduler)
        for key, opt in self._opts.items():
            if out.get(key) is None:
                if opt.is_required:
                    raise UsageError(f"missing required option {key!r}{where}: {opt.help}")
                out[key] = opt.default
        return out

    def _unknown(self, key: str, where: str) -> str:
        valid = ", ".join(sorted(self._opts)) or "(none)"
        import difflib  # only on a usage error

        close = difflib.get_close_matches(key, self._opts, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown option {key!r}{where}{hint}; valid options: {valid}"

    def cfg_from_str(self, text: str, scheduler: str = "") -> dict[str, CfgVal]:
        """Parse ``k=v,k2=a;b`` against this schema (values typed, keys checked)."""
        where = f" for scheduler {scheduler!r}" if scheduler else ""
        out: dict[str, CfgVal] = {}
        pairs = split_unquoted(text, ",")
        if pairs and not pairs[-1].strip():
            pairs.pop()  # one trailing comma is harmless
        for pair in pairs:
            if not pair.strip():
                raise UsageError(
                    f"empty option in {text!r}: expected key=value[,key=value...]",
                    hint="see `trainlaunch runopts` for the options",
                )
            key, eq, raw = pair.partition("=")
            key = key.strip()
            if not eq or not key:
                raise UsageError(f"malformed option {pair!r}: expected key=value")
            opt = self._opts.get(key)
            if opt is None:
                raise UsageError(self._unknown(key, where))
            out[key] = _checked(key, opt, parse_value(key, opt, unquote(raw.strip())))
        return out


def split_unquoted(text: str, sep: str) -> list[str]:
    """Split on sep outside single or double quotes (quotes are kept)."""
    parts, cur, quote = [], [], ""
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            cur.append(ch)
        elif ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if quote:
        raise UsageError(f"unbalanced quote in {text!r}")
    parts.append("".join(cur))
    return parts


def unquote(text: str) -> str:
    """Strip one pair of matching outer quotes."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def parse_value(key: str, opt: runopt, raw: str) -> CfgVal:
    """Convert the text of one option value to its declared type."""
    t = opt.opt_type
    if t is str:
        return raw
    if t is bool:
        low = raw.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise UsageError(f"option {key!r} expects a bool (true/false), got {raw!r}")
    if t is int:
        try:
            return int(raw)
        except ValueError:
            raise UsageError(f"option {key!r} expects an int, got {raw!r}") from None
    if t is float:
        try:
            value = float(raw)
        except ValueError:
            raise UsageError(f"option {key!r} expects a float, got {raw!r}") from None
        if not math.isfinite(value):
            raise UsageError(f"option {key!r} expects a finite number, got {raw!r}")
        return value
    items = [unquote(x.strip()) for x in split_unquoted(raw, ";") if x.strip()]
    if t is list:
        return items
    out: dict[str, str] = {}
    for item in items:
        k, sep, v = item.partition(":")
        if not sep:
            k, sep, v = item.partition("=")
        if not sep or not k:
            raise UsageError(f"option {key!r} expects k:v items separated by ';', got {item!r}")
        out[k.strip()] = v.strip()
    return out


def _coerce(key: str, opt: runopt, value: Any) -> CfgVal:
    t = opt.opt_type
    if isinstance(value, str) and t is not str:
        return parse_value(key, opt, value)
    ok = (
        (t is bool and isinstance(value, bool))
        or (t is int and isinstance(value, int) and not isinstance(value, bool))
        or (t is float and isinstance(value, (int, float)) and not isinstance(value, bool))
        or (t is str and isinstance(value, str))
        or (
            t is list
            and isinstance(value, (list, tuple))
            and all(isinstance(x, str) for x in value)
        )
        or (
            t is dict
            and isinstance(value, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        )
    )
    if not ok:
        raise UsageError(f"option {key!r} expects {opt.type_name}, got {value!r}")
    if t is float:
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise UsageError(f"option {key!r} expects a finite number, got {value!r}")
        return number
    if t is list:
        return list(value)
    if t is dict:
        return dict(value)
    return value


def _checked(key: str, opt: runopt, value: CfgVal) -> CfgVal:
    if opt.choices and value is not None and value not in opt.choices:
        raise UsageError(f"{key} must be one of {', '.join(opt.choices)}, got {value!r}")
    why = opt.check(value) if opt.check is not None and value is not None else None
    if why:
        raise UsageError(f"option {key!r}: {why}, got {value!r}")
    return value


def at_least(low: float) -> Callable[[Any], str | None]:
    """A check: the number must be >= low."""
    return lambda v: None if v >= low else f"must be >= {low:g}"


NO_WATCHDOG = " (leave hang_timeout unset for no hang watchdog)"  # 0 and -1 were silently off


def above(low: float, why: str = "") -> Callable[[Any], str | None]:
    """A check: the number must be > low (why: what to do instead, said with the error)."""
    return lambda v: None if v > low else f"must be > {low:g}{why}"


def in_range(low: int, high: int) -> Callable[[Any], str | None]:
    """A check: the number must be in low..high."""
    return lambda v: None if low <= v <= high else f"must be in {low}-{high}"


def current_dir() -> str:
    """os.getcwd(), or a UsageError where the shell's directory was removed (or renamed)
    after it entered it: what a relative path, the project file and an app's cwd start from."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise UsageError(
            "the current directory no longer exists (removed since this shell entered it)",
            hint="cd to a directory that exists (or give the app one: --cfg cwd=DIR)",
        ) from None


def existing_dir(value: Any) -> str | None:
    """A check: the path must be an existing directory here."""
    return None if os.path.isdir(os.path.expanduser(str(value))) else "no such directory"
