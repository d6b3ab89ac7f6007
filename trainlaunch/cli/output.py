"""Console helpers: data to stdout, narration to stderr, rich only on a terminal."""

from __future__ import annotations

import sys
from typing import Any

import click

_emitted: list[bool] = []  # a JSON document went to stdout (the boundary adds none for errors)


def emit_json(doc: Any, one_line: bool = False) -> None:
    """One JSON document on stdout (one_line: also a valid JSON Lines record)."""
    sys.stdout.write(_dumps(doc, one_line) + "\n")
    _emitted.append(True)


def _dumps(doc: Any, one_line: bool) -> str:
    """orjson where it can (a 1,000-app `list --json` spent a quarter of its time in json's
    pure-Python indenting encoder), json otherwise: the same document, strict JSON."""
    if not one_line:
        try:
            import orjson

            return orjson.dumps(doc, default=str, option=orjson.OPT_INDENT_2).decode()
        except (ImportError, TypeError):  # non-str keys, ints past 64 bits: json takes them
            pass
    import json  # the fallback only: ~1.7 ms of every command's import otherwise

    return json.dumps(doc, indent=None if one_line else 2, default=str)


def json_emitted() -> bool:
    """True once this command line printed a JSON document."""
    return bool(_emitted)


def forget_emitted() -> None:
    """A new command line starts (boundary.main may run more than once in one process)."""
    _emitted.clear()


def emit(text: str) -> None:
    """Data on stdout."""
    if text:
        sys.stdout.write(text + "\n")


def narrate(text: str) -> None:
    """Narration on stderr."""
    sys.stderr.write(text + "\n")


def narrate_or_drop(text: str) -> None:
    """Narration that nobody may be reading any more: the `tee` of `2>&1 | tee log` dies of
    the same Ctrl-C, and a write that fails then must not change what the command does."""
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except OSError:  # EPIPE, EIO: later writes (and the flush at exit) go nowhere instead
        import os

        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), sys.stderr.fileno())


def stdout_is_tty() -> bool:
    """True when a person reads stdout."""
    return sys.stdout.isatty()


def stderr_is_tty() -> bool:
    """True when a person reads stderr."""
    return sys.stderr.isatty()


def json_option(fn: Any) -> Any:
    """The --json flag every command has."""
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON document on stdout (stable keys)."
    )(fn)


def rich_console(stderr: bool = False) -> Any:
    """A rich Console (imported lazily: rich costs ~0.1 s to import)."""
    from rich.console import Console

    return Console(stderr=stderr)
