"""Hypothesis strategies shared by the fuzz suite: hostile text built from meaningful pieces.

Pure random unicode rarely gets past the first check of a parser; mixing in the separators,
keywords and escapes each parser cares about reaches the deeper branches.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st


def examples(n: int) -> Any:
    """Hypothesis settings for n examples (no example database: the repo stays clean)."""
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large,
        ],
    )


HOSTILE_PIECES = [
    "local",
    "slurm",
    "kubernetes",
    "k8s",
    "://",
    ":",
    "/",
    "//",
    ".",
    "..",
    "...",
    "%2e",
    "%2f",
    "%00",
    "\0",
    "\n",
    "\r",
    "\t",
    " ",
    "\\",
    "\uff0e",
    "\u2025",
    "\u202e",
    "\ufeff",
    "~",
    "$HOME",
    "$(id)",
    "`id`",
    ";",
    "|",
    "&",
    "'",
    '"',
    ",",
    "=",
    "-",
    "--",
    "_",
    "0",
    "-1",
    "99999999999999999999",
    "1e400",
    "nan",
    "inf",
    "a",
    "Z",
    "trainlaunch",
    "app-1",
    "echo-abc123",
    "日本",
    "🚀",
    "x" * 70,
    "y" * 260,
]


def hostile_text(pieces: list[str] | None = None, max_size: int = 12) -> st.SearchStrategy[str]:
    """Concatenations of meaningful pieces and arbitrary characters."""
    piece = st.one_of(
        st.sampled_from(pieces or HOSTILE_PIECES), st.text(max_size=6), st.characters().map(str)
    )
    return st.lists(piece, max_size=max_size).map("".join)


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Arbitrary JSON documents."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
    )
    return st.recursive(
        scalars,
        lambda c: st.one_of(
            st.lists(c, max_size=4), st.dictionaries(st.text(max_size=8), c, max_size=4)
        ),
        max_leaves=max_leaves,
    )
