"""The torch-free agent as a zipapp, so a pod runs ``dist.ddp`` in an image without trainlaunch.

The archive holds the whole ``trainlaunch.agent`` package plus the trainlaunch modules it
imports (found by reading their imports, not listed by hand; ``settings`` and ``errors``
today), the preflight's probe script (read as data: it runs where torch is) and a ``__main__.py`` that first checks the interpreter's version, in syntax every
Python (2.7 too) parses, so an image whose Python is too old says so in one line. The bytes are
deterministic (fixed timestamps, sorted entries): a dryrun of the same trainlaunch renders the
same ConfigMap. Anything outside trainlaunch that the agent imports must be the standard
library: building fails otherwise, since the image may have nothing else.
"""

from __future__ import annotations

import ast
import functools
import io
import sys
import zipfile
from pathlib import Path

from trainlaunch.errors import TrainlaunchError
from trainlaunch.preflight.probe import PROBE_RESOURCE

PACKAGE = "trainlaunch.agent"
MIN_PYTHON = (3, 10)  # pyproject's requires-python (a test keeps them equal)
ARCHIVE_NAME = "agent.pyz"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the zip format's first timestamp: no build time leaks in
_ROOT = Path(__file__).resolve().parents[2]  # the trainlaunch package directory

MAIN = """\
# trainlaunch's node agent (python agent.pyz [torchrun flags] script ...): generated
import sys
if sys.version_info[:2] < {min!r}:
    sys.stderr.write(
        "trainlaunch: the agent needs Python >= {min_text}, but %s is Python %d.%d; "
        "use an image with a newer Python or choose another with --cfg python=...\\n"
        % (sys.executable or "python", sys.version_info[0], sys.version_info[1])
    )
    sys.exit(2)
from trainlaunch.agent.main import main
sys.exit(main())
"""


class BundleError(TrainlaunchError):
    """The agent imports something that cannot travel in the zipapp (a bug, not user input)."""


def _module_file(name: str) -> Path | None:
    """trainlaunch.x.y -> its source file (module or package __init__), None if there is none."""
    parts = name.split(".")[1:]
    base = _ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if parts and candidate.is_file():
            return candidate
    return _ROOT / "__init__.py" if not parts else None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Absolute names of every module imported anywhere in tree (type-checking blocks aside)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for stmt in node.orelse:
                visit(stmt)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package that holds this module
                pkg = module.split(".")
                pkg = pkg if is_package else pkg[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join([*pkg, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # maybe submodules
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def bundled_modules() -> dict[str, Path]:
    """Module name -> source file for everything the agent needs from trainlaunch."""
    pending = [f"{PACKAGE}.{p.stem}" for p in sorted((_ROOT / "agent").glob("*.py"))]
    pending = [PACKAGE if n.endswith(".__init__") else n for n in pending]
    out: dict[str, Path] = {}
    while pending:
        name = pending.pop()
        if name in out:
            continue
        path = _module_file(name)
        if path is None:
            continue  # a name imported from a module, not a module itself
        out[name] = path
        parts = name.split(".")
        pending += [".".join(parts[:i]) for i in range(1, len(parts))]  # parent packages
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for imported in _imports(tree, name, path.name == "__init__.py"):
            top = imported.split(".")[0]
            if top == "trainlaunch":
                pending.append(imported)
            elif top and top != "__future__" and top not in sys.stdlib_module_names:
                raise BundleError(
                    f"{name} imports {imported!r}, which is not in the standard library: "
                    "the agent zipapp cannot carry it"
                )
    return out


@functools.cache
def build_agent_zipapp() -> bytes:
    """The zipapp's bytes: deterministic for a given trainlaunch source tree."""
    files = {
        str(path.relative_to(_ROOT.parent)).replace("\\", "/"): path.read_bytes()
        for path in bundled_modules().values()
    }
    # read by the agent, not imported: the preflight's probe runs in the ranks' interpreter
    files[f"trainlaunch/{PROBE_RESOURCE}"] = (_ROOT / PROBE_RESOURCE).read_bytes()
    text = "{}.{}".format(*MIN_PYTHON)
    files["__main__.py"] = MAIN.format(min=MIN_PYTHON, min_text=text).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for arcname in sorted(files):
            info = zipfile.ZipInfo(arcname, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, files[arcname], compresslevel=9)
    return buf.getvalue()
