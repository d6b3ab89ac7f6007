"""The peers, installed once into a cache OUTSIDE the repository and reused.

* ``<cache>/peers-venv``: a venv with ``torchx==0.7.0`` and ``torch==2.13.0`` (always pinned:
  that exact pin installs the CPU wheel this machine keeps on disk; an unpinned torch would
  pull a multi-GB CUDA build), plus numpy at our version so torch imports alike in both.
* ``<cache>/nemo/metric_logger.py``: NeMo Automodel 0.7.0's logger, taken from the wheel that
  ``pip download --no-deps nemo-automodel==0.7.0`` fetches; only that file is used (it imports
  only torch), loaded with importlib; none of NeMo's heavy dependencies are installed.
* torchrun: the one next to our own interpreter (our torch), else the peers venv's.

The cache is ``$TRAINLAUNCH_BENCH_CACHE`` or ``~/.cache/trainlaunch-bench``. No peer code is
copied into the project.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import venv
import zipfile
from importlib import metadata
from pathlib import Path

TORCHX_SPEC = "torchx==0.7.0"
TORCH_SPEC = "torch==2.13.0"
NEMO_SPEC = "nemo-automodel==0.7.0"
NEMO_LOGGER = "nemo_automodel/components/loggers/metric_logger.py"


def cache_dir() -> Path:
    """Where the peers live (outside the repository)."""
    explicit = os.environ.get("TRAINLAUNCH_BENCH_CACHE")
    return Path(explicit).expanduser() if explicit else Path.home() / ".cache" / "trainlaunch-bench"


@dataclasses.dataclass
class Peers:
    """Paths of the peer tools; None with a reason where one is not available."""

    torchx: Path | None = None
    torchx_python: Path | None = None
    torchrun: Path | None = None
    torch_python: Path | None = None  # an interpreter that can `import torch`
    nemo_logger: Path | None = None
    missing: dict[str, str] = dataclasses.field(default_factory=dict)

    def why(self, name: str) -> str:
        """Why a peer is missing (for SKIP rows)."""
        return self.missing.get(name, f"{name} not available")


def _say(text: str) -> None:
    sys.stderr.write(f"[bench setup] {text}\n")
    sys.stderr.flush()


def _pip(python: Path, *args: str) -> None:
    proc = subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = [ln for ln in proc.stderr.splitlines() if "is ignored" not in ln][-5:]
        raise RuntimeError(f"pip {' '.join(args)} failed:\n  " + "\n  ".join(tail))


def _numpy_spec() -> list[str]:
    """numpy at our version, so that torch imports the same way in both environments."""
    try:
        return [f"numpy=={metadata.version('numpy')}"]
    except metadata.PackageNotFoundError:  # we have no numpy, so neither do they
        return []


def ensure_venv(cache: Path, install: bool) -> tuple[Path | None, str]:
    """The peers venv (created or completed on first use when install is True)."""
    root = cache / "peers-venv"
    stamp = root / ".bench-ready"
    specs = [TORCHX_SPEC, TORCH_SPEC, *_numpy_spec()]
    want = " ".join(specs) + "\n"
    python = root / "bin" / "python"
    if stamp.exists() and stamp.read_text() == want and python.exists():
        return root, ""
    if not install:
        return None, f"peers not installed (run without --no-setup to create {root})"
    _say(f"installing {' '.join(specs)} into {root} (one time, a few minutes)")
    try:
        if not python.exists():
            shutil.rmtree(root, ignore_errors=True)
            venv.EnvBuilder(with_pip=True, clear=True).create(root)
        _pip(python, "install", "-q", *specs)
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        return None, f"peers venv setup failed: {e}"
    stamp.write_text(want)
    return root, ""


def ensure_nemo_logger(cache: Path, python: Path, install: bool) -> tuple[Path | None, str]:
    """NeMo Automodel's metric_logger.py, unpacked from the downloaded wheel."""
    target = cache / "nemo" / "metric_logger.py"
    if target.exists():
        return target, ""
    if not install:
        return None, "nemo logger not downloaded (run without --no-setup)"
    wheels = cache / "wheels"
    _say(f"downloading {NEMO_SPEC} (--no-deps) into {wheels}")
    try:
        _pip(python, "download", "-q", "--no-deps", NEMO_SPEC, "-d", str(wheels))
        found = sorted(wheels.glob("nemo_automodel-0.7.0-*.whl"))
        if not found:
            raise RuntimeError("no nemo_automodel 0.7.0 wheel after pip download")
        with zipfile.ZipFile(found[0]) as whl:
            text = whl.read(NEMO_LOGGER)
    except (OSError, KeyError, RuntimeError, zipfile.BadZipFile) as e:
        return None, f"nemo logger setup failed: {e}"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(text)
    return target, ""


def project_dependencies(repo: Path) -> list[str]:
    """The names in pyproject.toml's [project] dependencies (what a user's install gets)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: the project depends on tomli there
        import tomli as tomllib
    with open(repo / "pyproject.toml", "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    return [re.match(r"[A-Za-z0-9_.-]+", d).group(0) for d in deps]  # type: ignore[union-attr]


def _version_specs(*names: str) -> list[str]:
    """name==version for each package this interpreter has (so both envs match ours).

    A dependency this interpreter lacks is left out: its environment marker excludes it here
    (tomli on Python >= 3.11).
    """
    out = []
    for name in names:
        try:
            out.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return out


def ensure_ours_venv(cache: Path, repo: Path, install: bool) -> tuple[Path | None, str]:
    """A clean venv with the working tree installed as a user gets it (a non-editable wheel).

    Its dependencies (every runtime dependency in pyproject.toml, e.g. orjson, plus numpy, at
    this interpreter's versions, and torch 2.13.0) are installed once; trainlaunch itself is reinstalled from a copy of the working tree on every
    bench run, so the numbers are those of the current code, without the start-up cost that an
    editable install's import hook (or a machine's own .pth files) adds to every interpreter.
    """
    root = cache / "ours-venv"
    python = root / "bin" / "python"
    specs = [
        "setuptools>=68",
        "wheel",
        TORCH_SPEC,
        *_version_specs(*project_dependencies(repo), "numpy"),
    ]
    want = " ".join(specs) + "\n"
    stamp = root / ".bench-ready"
    if not (stamp.exists() and stamp.read_text() == want and python.exists()):
        if not install:
            return None, f"our bench venv is not set up (run without --no-setup to create {root})"
        _say(f"installing {' '.join(specs)} into {root} (one time, a few minutes)")
        try:
            if not python.exists():
                shutil.rmtree(root, ignore_errors=True)
                venv.EnvBuilder(with_pip=True, clear=True).create(root)
            _pip(python, "install", "-q", *specs)
        except (OSError, RuntimeError, subprocess.SubprocessError) as e:
            return None, f"our bench venv setup failed: {e}"
        stamp.write_text(want)
    with tempfile.TemporaryDirectory(prefix="trainlaunch-src-") as tmp:
        src = Path(tmp)  # a copy: building must not write build/ or *.egg-info into the repo
        for name in ("trainlaunch", "components"):
            shutil.copytree(
                repo / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(repo / name, src / name)
        try:
            _pip(
                python,
                "install",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "--force-reinstall",
                str(src),
            )
        except RuntimeError as e:
            return None, f"installing the working tree into {root} failed: {e}"
    return root, ""


def _has_torch(python: str) -> bool:
    if Path(python) == Path(sys.executable):
        return importlib.util.find_spec("torch") is not None
    return subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0


def find_peers(ours_python: Path, install: bool = True) -> Peers:
    """Set up (once) and locate every peer; torchrun is the one of our own torch."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    peers = Peers()
    root, why = ensure_venv(cache, install)
    if _has_torch(str(ours_python)):
        peers.torch_python = ours_python
        if (ours_python.parent / "torchrun").exists():
            peers.torchrun = ours_python.parent / "torchrun"
    if root is None:
        peers.missing.update({"torchx": why, "nemo": why})
    else:
        peers.torchx = root / "bin" / "torchx"
        peers.torchx_python = root / "bin" / "python"
        peers.torch_python = peers.torch_python or peers.torchx_python
        peers.torchrun = peers.torchrun or root / "bin" / "torchrun"
    if peers.torchrun is None:
        peers.missing["torchrun"] = why or "no torchrun next to our interpreter"
    if peers.torch_python is None:
        peers.missing["torch"] = why or "torch is not importable by our interpreter"
    nemo, nwhy = ensure_nemo_logger(cache, peers.torchx_python or ours_python, install)
    peers.nemo_logger = nemo
    if nemo is None:
        peers.missing["nemo"] = nwhy
    return peers


def no_peers(reason: str) -> Peers:
    """Peers deliberately not used (the smoke run)."""
    return Peers(missing={k: reason for k in ("torchx", "torchrun", "torch", "nemo")})
