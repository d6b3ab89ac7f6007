"""Before/after in one run: ``python bench/run.py --before REV`` (benchmarks run, launch).

The tree at REV (a ``git worktree`` of this repository, in the bench cache) and the working
tree are each installed with ``pip install --target`` into a directory of their own, and both
run with our bench venv's interpreter (its torch, click, orjson...) and ``PYTHONPATH`` set to
that directory, so that the CLI, the supervisor and the node agent (which inherit it) all run
the variant's code; the two pay the same for the extra path entry. Each directory gets a
``bin/trainlaunch`` script that is the console script pip writes. The benchmarks that take
variants measure them interleaved with every other case and add rows ``after`` vs ``before``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

SCRIPT = """#!{python}
import re
import sys
from trainlaunch.cli.boundary import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def _run(*argv: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        tail = [ln for ln in proc.stderr.splitlines() if "is ignored" not in ln][-5:]
        raise RuntimeError(f"{' '.join(argv[:4])} failed:\n  " + "\n  ".join(tail))
    return proc.stdout.strip()


def checkout(repo: Path, rev: str, cache: Path) -> tuple[Path, str]:
    """A worktree of repo at rev under cache (reused when it is there); (path, full sha)."""
    sha = _run("git", "-C", str(repo), "rev-parse", "--verify", f"{rev}^{{commit}}")
    path = cache / f"tree-{sha[:12]}"
    if not (path / "pyproject.toml").exists():
        shutil.rmtree(path, ignore_errors=True)
        _run("git", "-C", str(repo), "worktree", "prune")
        _run("git", "-C", str(repo), "worktree", "add", "--detach", str(path), sha)
    return path, sha


def install(python: Path, tree: Path, dest: Path) -> Path:
    """tree installed into dest (replaced) with python's pip; dest, with bin/trainlaunch."""
    shutil.rmtree(dest, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="trainlaunch-src-") as tmp:
        src = Path(tmp)  # a copy: building must not write build/ or *.egg-info into the tree
        for name in ("trainlaunch", "components"):
            shutil.copytree(
                tree / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(tree / name, src / name)
        _run(
            str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
            "--target", str(dest), str(src),
        )  # fmt: skip
    _run(str(python), "-m", "compileall", "-q", str(dest / "trainlaunch"))
    script = dest / "bin" / "trainlaunch"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(SCRIPT.format(python=python))
    script.chmod(0o755)
    return dest


def prepare(python: Path, repo: Path, rev: str, cache: Path) -> dict[str, Path]:
    """{"before": site of rev, "after": site of the working tree}; the labels name the sha."""
    tree, sha = checkout(repo, rev, cache)
    before = install(python, tree, cache / "variant-before")
    after = install(python, repo, cache / "variant-after")
    (before / "REV").write_text(sha)
    return {"before": before, "after": after}
