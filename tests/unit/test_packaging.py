"""What the wheel ships: trainlaunch and its builtins under one name, nothing top-level else."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]


def _declared() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_in_the_tree_is_declared() -> None:
    found = {
        ".".join(p.parent.relative_to(REPO).parts)
        for p in (REPO / "trainlaunch").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    found |= {"trainlaunch.components"}
    assert set(_declared()["packages"]) == found
    assert _declared()["package-dir"] == {"trainlaunch.components": "components"}


def test_license_is_an_spdx_string() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"


@pytest.mark.slow
def test_the_wheel_takes_no_top_level_name_but_trainlaunch(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("trainlaunch", "components"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    out = tmp_path / "dist"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out.glob("trainlaunch-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"trainlaunch"}
    assert "trainlaunch/components/dist.py" in names
    assert "trainlaunch/components/utils.py" in names
    assert "trainlaunch/schedulers/slurm/render.py" in names
    assert "warning" not in proc.stderr.lower(), proc.stderr  # e.g. the license-table deprecation
    # the wheel's components resolve from an unpacked install, outside the repo
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "from trainlaunch.resolver import find_component; "
        "from trainlaunch.resolver.finder import builtin_dir; "
        "find_component('dist.ddp').materialize(['t.py']); "
        "find_component('utils.echo').materialize(['--msg', 'x']); print(builtin_dir())"
    )
    run = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {code}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert Path(run.stdout.strip()) == site / "trainlaunch" / "components"
