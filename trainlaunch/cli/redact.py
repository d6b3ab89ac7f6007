"""Masking of secret-looking env values in anything trainlaunch prints."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# the rule: names like *TOKEN*, *SECRET*, *PASSWORD*, *KEY* (anywhere in the name)
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|KEY", re.I)
MASK = "********"


def is_secret(name: str) -> bool:
    """True for env names like *TOKEN*, *SECRET*, *PASSWORD*, *KEY*."""
    return bool(SECRET_NAME.search(name))


def redact_env(env: Mapping[str, str], show_secrets: bool = False) -> dict[str, str]:
    """A copy of env with secret-looking values masked (unless show_secrets)."""
    if show_secrets:
        return dict(env)
    return {k: (MASK if is_secret(k) and v else v) for k, v in env.items()}


def secret_values(envs: Iterable[Mapping[str, str]]) -> list[str]:
    """The values of secret-looking variables (longest first, empty ones skipped)."""
    vals = {v for env in envs for k, v in env.items() if is_secret(k) and v}
    return sorted(vals, key=len, reverse=True)


def mask_text(text: str, values: Iterable[str]) -> str:
    """Replace every occurrence of each secret value (and its shell-quoted form) in text."""
    import shlex

    for v in values:
        text = text.replace(shlex.quote(v), MASK).replace(v, MASK)
    return text
