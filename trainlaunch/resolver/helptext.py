"""``trainlaunch run NAME --help``: usage, description, every option with type, default, help."""

from __future__ import annotations

import enum
import textwrap
from typing import Any

from trainlaunch.resolver.signature import Option, Spec

WIDTH = 100
COLUMN = 30  # where option help starts


def render_help(spec: Spec) -> str:
    """The full help text of a component."""
    out = [_usage(spec), ""]
    if spec.description:
        out += [spec.description, ""]
    va = spec.varargs
    if va is not None:
        out.append("positional arguments:")
        text = (va.help + " " if va.help else "") + (
            "(the first positional argument and everything after it, or everything after --)"
        )
        out += _entry(f"{va.param.upper()} ...", text)
        out.append("")
    out.append("options:")
    for opt in spec.options:
        out += _entry(_names(opt), _describe(opt))
    out += _entry("-h, --help", "show this help and exit")
    out += ["", _footer(spec)]
    return "\n".join(out).rstrip() + "\n"


def _usage(spec: Spec) -> str:
    parts = [f"trainlaunch run {spec.component}"]
    parts += [f"{o.flag} {o.info.metavar}".rstrip() for o in spec.options if o.required]
    if any(not o.required for o in spec.options):
        parts.append("[options]")
    if spec.varargs is not None:
        parts.append(f"[--] [{spec.varargs.param.upper()} ...]")
    return textwrap.fill(
        " ".join(parts),
        WIDTH,
        initial_indent="usage: ",
        subsequent_indent=" " * 7,
        break_on_hyphens=False,
    )


def _names(opt: Option) -> str:
    short = [n for n in opt.names if not n.startswith("--")]
    long = [n for n in opt.names if n.startswith("--")]
    if opt.info.kind == "flag" and not opt.param.startswith("no_"):  # no --no-no-python
        long = [f"{long[0]} / --no-{long[0][2:]}"] + long[1:]
        return ", ".join(short + long)
    return ", ".join(short + long) + " " + opt.info.metavar


def _describe(opt: Option) -> str:
    text = opt.help.strip()
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1]  # the notes in parentheses end the sentence
    notes = []
    if opt.info.accumulates and opt.info.kind != "dict":
        notes.append("repeatable or comma-separated")
    elif opt.info.kind == "dict":
        notes.append("repeatable")
    if opt.required:
        notes.append("required")
    elif opt.default not in (None, (), []) and "default" not in text.lower():
        notes.append(f"default: {_show(opt.default, bool(opt.info.item.choices))}")
    if notes:
        text = f"{text} ({'; '.join(notes)})" if text else f"({'; '.join(notes)})"
    return text


def _show(value: Any, bare: bool = False) -> str:
    """A default as the user would type it (choices bare, other strings quoted)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, str):
        return value if bare else repr(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_show(v, True) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def _entry(names: str, text: str) -> list[str]:
    lead = "  " + names
    indent = " " * COLUMN
    if not text:
        return [lead]
    if len(lead) < COLUMN - 1:
        return textwrap.wrap(
            text,
            WIDTH,
            initial_indent=lead.ljust(COLUMN),
            subsequent_indent=indent,
            break_on_hyphens=False,
        )
    return [lead] + textwrap.wrap(
        text, WIDTH, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
    )


def _footer(spec: Spec) -> str:
    return textwrap.fill(
        "Option names also accept '_' for '-'. Defaults can be set in the config file under "
        f'[component."{spec.component}"] (docs/configuration.md); the command line wins.',
        WIDTH,
    )
