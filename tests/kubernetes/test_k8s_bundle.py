"""The agent zipapp that pods of stock images run: contents, size, determinism, and that it runs
with no trainlaunch installed; the image-interpreter choice (python3, else python)."""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

from trainlaunch.schedulers.kubernetes import bundle
from trainlaunch.schedulers.kubernetes.image import PICK_PYTHON
from trainlaunch.schedulers.kubernetes.job_checks import MAX_CONFIGMAP_BYTES

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pyz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bundle") / "agent.pyz"
    path.write_bytes(bundle.build_agent_zipapp())
    return path


def isolated(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """This interpreter without site-packages (-I -S): no trainlaunch, no torch."""
    return subprocess.run(
        [sys.executable, "-I", "-S", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_the_zipapp_holds_the_whole_agent_package_and_what_it_imports() -> None:
    names = set(zipfile.ZipFile(io.BytesIO(bundle.build_agent_zipapp())).namelist())
    agent = {f"trainlaunch/agent/{p.name}" for p in (REPO / "trainlaunch" / "agent").glob("*.py")}
    assert agent <= names
    # computed from the imports, not listed: today settings/errors (+ what they import)
    assert {"__main__.py", "trainlaunch/__init__.py", "trainlaunch/settings.py"} <= names
    assert "trainlaunch/errors.py" in names
    assert not any(n.startswith(("trainlaunch/cli/", "trainlaunch/schedulers/")) for n in names)


def test_the_zipapp_is_deterministic_and_fits_a_configmap() -> None:
    one, two = bundle.build_agent_zipapp.__wrapped__(), bundle.build_agent_zipapp.__wrapped__()
    assert one == two
    for info in zipfile.ZipFile(io.BytesIO(one)).infolist():
        assert info.date_time == (1980, 1, 1, 0, 0, 0)
    # measured: 134 KiB (178 KiB as base64) with the preflight, the store and the late-node
    # and terminal code; a quarter of the 1 MiB ConfigMap limit leaves the rest for the app
    assert len(one) < MAX_CONFIGMAP_BYTES // 4, len(one)


def test_the_zipapp_runs_without_trainlaunch_installed(pyz: Path, tmp_path: Path) -> None:
    assert isolated("-c", "import trainlaunch", cwd=tmp_path).returncode != 0
    r = isolated(str(pyz), "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "--nproc-per-node" in r.stdout
    # a real node of 2 workers with torchrun's env (the workers need no torch here)
    script = tmp_path / "w.py"
    script.write_text("import os; print('W', os.environ['RANK'], os.environ['WORLD_SIZE'])\n")
    r = isolated(str(pyz), "--nproc-per-node", "2", "--tee", "0", str(script), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(line for line in r.stdout.splitlines() if line.startswith("W")) == [
        "W 0 2",
        "W 1 2",
    ]


def test_an_old_python_gets_one_line(pyz: Path, tmp_path: Path) -> None:
    # stand in for an old interpreter: the guard runs before anything else is imported
    code = (
        "import runpy, sys; sys.version_info = (3, 8, 10, 'final', 0); "
        f"sys.argv = [{str(pyz)!r}, '--help']; runpy.run_path({str(pyz)!r}, run_name='__main__')"
    )
    r = isolated("-c", code, cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert "the agent needs Python >= 3.10" in lines[0] and "is Python 3.8" in lines[0]


def test_the_guard_parses_on_any_python() -> None:
    main = zipfile.ZipFile(io.BytesIO(bundle.build_agent_zipapp())).read("__main__.py").decode()
    assert "f'" not in main and 'f"' not in main  # no f-strings: Python 2 and 3.5 parse it
    ast.parse(main, feature_version=(3, 4))


def test_min_python_is_the_projects() -> None:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert meta["project"]["requires-python"] == ">={}.{}".format(*bundle.MIN_PYTHON)


@pytest.mark.parametrize("names", [["python3"], ["python"], ["python", "python3"]])
def test_the_image_interpreter_is_python3_else_python(tmp_path: Path, names: list[str]) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in names:
        (bindir / name).symlink_to(sys.executable)
    env = {"PATH": str(bindir)}
    code = "import sys; print('ok', sys.argv[1:])"
    r = subprocess.run(
        ["/bin/sh", "-c", PICK_PYTHON, "python", "-c", code, "a b"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok ['a b']"


def test_an_image_without_python_says_so_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    r = subprocess.run(
        ["/bin/sh", "-c", PICK_PYTHON, "python", "-c", "pass"],
        env={"PATH": str(tmp_path / "bin")},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 127
    assert r.stderr.count("\n") == 1 and "neither python3 nor python" in r.stderr


def test_python3_is_chosen_first(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, word in (("python3", "three"), ("python", "plain")):
        (bindir / name).write_text(f"#!/bin/sh\necho {word}\n")
        os.chmod(bindir / name, 0o755)
    r = subprocess.run(
        ["/bin/sh", "-c", PICK_PYTHON, "python"],
        env={"PATH": f"{bindir}:/bin:/usr/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.stdout.strip() == "three"


def test_every_agent_module_imports_from_the_zipapp_alone(pyz: Path, tmp_path: Path) -> None:
    # A check by another route than the builder's import reading: import each module of the
    # package with only the zipapp on sys.path (no site-packages, no source tree).
    code = (
        "import importlib, pkgutil, sys; sys.path[:0] = [sys.argv[1]]; "
        "import trainlaunch.agent as a; "
        "names = [m.name for m in pkgutil.walk_packages(a.__path__, 'trainlaunch.agent.')]; "
        "[importlib.import_module(n) for n in names if not n.endswith('__main__')]; "
        "print(len(names), sorted(m for m in sys.modules if m.startswith('trainlaunch'))[:3]); "
        "assert all(sys.argv[1] in (sys.modules[m].__file__ or '') "
        "for m in sys.modules if m.startswith('trainlaunch'))"
    )
    r = isolated("-c", code, str(pyz), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # every module and subpackage of the agent (its own __init__ is the package walked)
    assert int(r.stdout.split()[0]) == len(list((REPO / "trainlaunch" / "agent").rglob("*.py"))) - 1
