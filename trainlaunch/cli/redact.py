"""Masking of secret-looking env values in anything trainlaunch prints."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trainlaunch.settings import SECRET_MASK as MASK
from trainlaunch.settings import is_secret  # the one rule; backends keep secrets by it too


def redact_env(env: Mapping[str, str], show_secrets: bool = False) -> dict[str, str]:
    """A copy of env with secret-looking values masked (unless show_secrets)."""
    if show_secrets:
        return dict(env)
    return {k: (MASK if is_secret(k, v) and v else v) for k, v in env.items()}


def secret_values(envs: Iterable[Mapping[str, str]]) -> list[str]:
    """The values of secret-looking variables (longest first, empty ones skipped)."""
    vals = {v for env in envs for k, v in env.items() if is_secret(k, v) and v}
    return sorted(vals, key=len, reverse=True)


def mask_text(text: str, values: Iterable[str]) -> str:
    """Replace every occurrence of each secret value (and its shell-quoted form) in text."""
    import shlex

    for v in values:
        text = text.replace(shlex.quote(v), MASK).replace(v, MASK)
    return text
