"""An optional extra (``trainlaunch[ui]``) that is not installed: one usage error that says how
to add it the way this trainlaunch was installed (pip, pipx, uv tool, a source checkout)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from trainlaunch.errors import UsageError


def require(extra: str, modules: Sequence[str], what: str) -> None:
    """UsageError naming the install command when any of modules cannot be imported."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(
            f"{what} needs {' and '.join(missing)} (the optional extra trainlaunch[{extra}])",
            hint=install_hint(extra),
        )


# each optional extra's packages, as pyproject.toml pins them (a test checks they agree)
PACKAGES: dict[str, tuple[str, ...]] = {
    "plot": ("matplotlib>=3.7",),
    "top": ("textual>=8,<9",),
    "ui": ("starlette>=1,<2", "uvicorn>=0.30,<1"),
}


def install_hint(extra: str, prefix: str | None = None, source: Path | None = None) -> str:
    """The command that adds the extra to this installation: a source checkout installs its
    own extra; anything else installs the extra's packages into the environment trainlaunch
    runs in (``trainlaunch[EXTRA]`` from an index is not assumed to exist)."""
    prefix = prefix if prefix is not None else sys.prefix
    here = source if source is not None else Path(__file__).resolve().parents[2]
    if (here / "pyproject.toml").is_file() and "site-packages" not in here.parts:
        return f"pip install -e '{here}[{extra}]'  (this trainlaunch runs from a source checkout)"
    pkgs = " ".join(f"'{p}'" for p in PACKAGES[extra])
    parts = Path(prefix).parts
    if "pipx" in parts and "venvs" in parts:
        return f"pipx inject trainlaunch {pkgs}"
    if "uv" in parts and "tools" in parts:
        return f"uv pip install --python {Path(prefix) / 'bin' / 'python'} {pkgs}"
    return f"{sys.executable} -m pip install {pkgs}"


__all__ = ["PACKAGES", "install_hint", "require"]
