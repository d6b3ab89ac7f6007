"""Google-style docstrings -> (description, {parameter: help}); no third-party parser."""

from __future__ import annotations

import re

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns?|Yields?|"
    r"Raises|Examples?|Notes?|Attributes|See Also|Todo|Warnings?)\s*:\s*$"
)
_PARAM_SECTIONS = {"Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"}
_ENTRY = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(\([^)]*\))?\s*:\s*(?P<text>.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The text before the first section, and each documented parameter's help."""
    if not doc:
        return "", {}
    lines = doc.expandtabs().splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    base = 0  # indentation of entries in the current Args section
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        m = _SECTION.match(stripped)
        if m and _indent(line) == 0:
            section, current, base = m.group(1), None, -1
            continue
        if section is None:
            description.append(line.rstrip())
            continue
        if section not in _PARAM_SECTIONS or not stripped:
            continue
        indent = _indent(line)
        if base < 0:
            base = indent
        entry = _ENTRY.match(stripped) if indent <= base else None
        if entry:
            current = entry.group("name")
            params[current] = entry.group("text").strip()
        elif current is not None and indent > base:
            params[current] = (params[current] + " " + stripped).strip()  # continuation line
    return plain("\n".join(description).strip()), {k: plain(v) for k, v in params.items()}


_RST_LITERAL = re.compile(r"``([^`]+)``")


def plain(text: str) -> str:
    """reStructuredText's ``literal`` as terminal help shows code: `literal`."""
    return _RST_LITERAL.sub(r"`\1`", text)


def first_line(doc: str | None) -> str:
    """The first non-empty line of a docstring (a component's one-line description)."""
    for line in (doc or "").strip().splitlines():
        if line.strip():
            return plain(line.strip())
    return ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())
