"""Component name -> function, in a fixed order (docs/components.md):

1. an entry point in group ``trainlaunch.components`` (``name = "module:function"``); an entry
   point can never hide a builtin (TorchX #695 hid all builtins once any plugin existed);
2. a builtin ``module.function`` from ``trainlaunch.components`` (the repo's components/ folder,
   installed under trainlaunch's namespace, so a project's own ``components`` never meets it);
3. any importable ``pkg.mod.fn`` or ``pkg.mod:fn`` (sys.path, then the current directory);
4. ``path/to/file.py:fn`` (relative to cwd, or absolute), loaded as a real module with its
   directory on sys.path, so it can import its siblings; only that file is executed.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import keyword
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from trainlaunch.errors import ComponentError

if TYPE_CHECKING:
    import importlib.metadata
from trainlaunch.resolver.docstrings import first_line

ENTRY_POINT_GROUP = "trainlaunch.components"
BUILTIN_PACKAGE = "trainlaunch.components"
_FORMS = (
    "components are named 'module.function' (builtin, e.g. utils.echo), 'pkg.mod.fn' or "
    "'pkg.mod:fn' (importable), or 'path/to/file.py:fn'"
)


def builtin_dir() -> Path:
    """The folder of ``trainlaunch.components`` (the repo's components/, or the wheel's copy)."""
    spec = importlib.util.find_spec(BUILTIN_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ComponentError(
            f"trainlaunch's builtin components ({BUILTIN_PACKAGE}) are not installed",
            hint="install trainlaunch (pip install -e . in a checkout), not only put it on a path",
        )
    return Path(list(spec.submodule_search_locations)[0])


def builtin_components() -> dict[str, str]:
    """Builtin name -> one-line description, read with ast (nothing is imported)."""
    out: dict[str, str] = {}
    for path in sorted(builtin_dir().glob("*.py")):
        if not path.name.startswith("_"):
            out.update(_scan_builtin(path))
    return out


_SCANNED: dict[tuple[str, int, int], dict[str, str]] = {}  # (path, mtime, size) -> components


def _scan_builtin(path: Path) -> dict[str, str]:
    """The components one builtin file defines (cached while the file is unchanged)."""
    try:
        st = path.stat()
    except OSError:
        return {}
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _SCANNED:
        try:
            tree = ast.parse(path.read_bytes(), str(path))
        except (OSError, SyntaxError):
            return {}  # find_component reports the real error when it is imported
        _SCANNED[key] = {
            f"{path.stem}.{node.name}": first_line(ast.get_docstring(node))
            for node in tree.body
            if isinstance(node, ast.FunctionDef)
            and not node.name.startswith("_")
            and _returns_appdef(node)
        }
    return _SCANNED[key]


def _builtin_named(name: str) -> Callable[..., Any] | None:
    """The builtin component ``name`` is, found by importing its one file; None when it is not
    one (or that file does not load: the scan then says what is wrong). The same rule as the
    scan, which parses every builtin file with ast: ~5 ms of every `run`."""
    modname, _, attr = name.partition(".")
    if not (modname.isidentifier() and attr.isidentifier()) or "_" in (modname[0], attr[0]):
        return None
    if not (builtin_dir() / f"{modname}.py").is_file():
        return None
    try:
        module = _load(f"{BUILTIN_PACKAGE}.{modname}", f"builtin component {name!r}")
    except ComponentError:
        return None
    fn = vars(module).get(attr)
    if not callable(fn) or getattr(fn, "__module__", None) != module.__name__:
        return None  # imported from elsewhere: the scan sees only functions defined there
    if getattr(fn, "__qualname__", None) != attr or not hasattr(fn, "__code__"):
        return None
    ret = getattr(fn, "__annotations__", {}).get("return")
    ret = ret if isinstance(ret, str) else getattr(ret, "__name__", "")
    return fn if ret.strip("'\"").rsplit(".", 1)[-1] == "AppDef" else None


def _returns_appdef(node: ast.FunctionDef) -> bool:
    if node.returns is None:
        return False
    return ast.unparse(node.returns).strip("'\"").rsplit(".", 1)[-1] == "AppDef"


def entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """Entry-point name -> entry point; the first distribution on sys.path wins a tie."""
    import importlib.metadata  # lazily: ~30 ms that builtin lookups never need

    out: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        out.setdefault(ep.name, ep)
    return out


def list_components() -> list[tuple[str, str]]:
    """(name, one-line description) of builtins, then entry points; imports nothing."""
    builtins = builtin_components()
    out = sorted(builtins.items())
    for name, ep in sorted(entry_points().items()):
        if name not in builtins:
            out.append((name, _describe_unimported(ep.module, ep.attr or "")))
    return out


def resolve(name: str, cwd: str | None = None) -> tuple[Callable[..., Any], str]:
    """The function a component name refers to, and where it came from."""
    if not name or not name.strip():
        raise ComponentError("empty component name", hint=_FORMS)
    cwd = cwd or os.getcwd()
    if ":" in name:
        target, _, attr = name.rpartition(":")
        if not attr or not target:
            raise ComponentError(
                f"bad component name {name!r}: expected 'module:function' or "
                "'path/to/file.py:function'"
            )
        if target.endswith(".py") or "/" in target or os.sep in target:
            return _from_file(name, target, attr, cwd)
        module = _import(name, target, cwd)
        if module is None:
            raise ComponentError(
                f"no module named {target!r} (component {name!r})",
                hint="is its package installed or on PYTHONPATH?",
            )
        return _function(name, module, attr), f"module {target}"
    found = _builtin_named(name)  # before entry points: they can never hide a builtin
    if found is not None:
        return found, "builtin"
    builtins = builtin_components()
    if name in builtins:
        return _from_builtin(name), "builtin"
    eps = entry_points()
    if name in eps:
        return _from_entry_point(name, eps[name]), f"entry point {eps[name].value}"
    if name.endswith(".py"):  # a script, not a component (never "module X, function py")
        raise ComponentError(
            f"{name!r} is a script, not a component",
            hint=f"run it with a component: trainlaunch run dist.ddp {name} ARGS (torchrun-like),"
            f" or trainlaunch run utils.python {name} ARGS; a function in it: '{name}:FUNCTION'",
        )
    target, dot, attr = name.rpartition(".")
    if dot and target and not (builtin_dir() / f"{target.replace('.', '/')}.py").is_file():
        module = _import(name, target, cwd)
        if module is not None:
            return _function(name, module, attr), f"module {target}"
    raise _not_found(name, builtins, eps, cwd)


def _not_found(
    name: str, builtins: dict[str, str], eps: dict[str, Any], cwd: str
) -> ComponentError:
    known = list(builtins) + [n for n in eps if n not in builtins]
    module, _, attr = name.rpartition(".")
    local = Path(cwd, f"{module.replace('.', '/')}.py") if module else None
    if local is not None and (builtin_dir() / f"{module}.py").is_file() and _defines(local, attr):
        # a project file named like a builtin module: 'utils.fn' means the builtin utils
        return ComponentError(
            f"no builtin component named {name!r} (the builtin module {module!r} takes the"
            f" name {module}.*, not ./{local.name})",
            hint=f"for the function in your file: trainlaunch run {local.name}:{attr}",
        )
    import difflib  # the hint of a name that is not found: never on the way to a run

    close = difflib.get_close_matches(name, known, n=1)
    close += [k for k in known if k.endswith("." + name) and k not in close]
    hint = "did you mean " + " or ".join(repr(c) for c in close[:2]) + "?" if close else _FORMS
    return ComponentError(f"no component named {name!r}", hint=hint)


def _defines(path: Path, attr: str) -> bool:
    """True if the file at path defines a top-level function attr (read, never imported)."""
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return False
    return any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == attr for n in tree.body
    )


def _from_builtin(name: str) -> Callable[..., Any]:
    modname, _, attr = name.rpartition(".")
    module = _load(f"{BUILTIN_PACKAGE}.{modname}", f"builtin component {name!r}")
    return _function(name, module, attr)


def _from_entry_point(name: str, ep: importlib.metadata.EntryPoint) -> Callable[..., Any]:
    dist = getattr(getattr(ep, "dist", None), "name", None)
    what = f"entry point {name!r}" + (f" of distribution {dist!r}" if dist else "")
    if not ep.attr:
        raise ComponentError(f"{what} = {ep.value!r} must name a function ('module:function')")
    module = _load(ep.module, what)
    obj: Any = module
    for part in ep.attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ComponentError(f"{what}: {ep.module!r} has no attribute {ep.attr!r}")
    return _check_callable(name, obj)


def _from_file(name: str, target: str, attr: str, cwd: str) -> tuple[Callable[..., Any], str]:
    path = Path(target).expanduser()
    if not path.is_absolute():
        path = Path(cwd) / path
    path = path.resolve()
    if not path.is_file():
        raise ComponentError(f"component file {target!r} not found", hint=f"looked for {path}")
    module = load_file(path, f"component file {target!r}")
    return _function(name, module, attr, f"file {str(path)!r}"), f"file {path}"


def load_file(path: Path, what: str) -> ModuleType:
    """Import a .py file as a real module (by its own name when that is unambiguous)."""
    directory = str(path.parent)
    if directory not in sys.path:
        # appended, not prepended: its siblings are importable, but a sibling named like a
        # standard module (queue.py, json.py) can never replace what trainlaunch imports later
        sys.path.append(directory)
        importlib.invalidate_caches()
    stem = path.stem
    if stem.isidentifier() and not keyword.iskeyword(stem):
        existing = sys.modules.get(stem)
        if existing is not None and _same_file(getattr(existing, "__file__", None), path):
            return existing
        if existing is None:
            try:
                spec = importlib.util.find_spec(stem)
            except (ImportError, ValueError):
                spec = None
            if spec is not None and _same_file(spec.origin, path):
                return _load(stem, what)  # same object a sibling gets with `import stem`
    # The plain name is taken (stdlib, another file): a private name still makes a real module.
    import hashlib

    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    modname = f"_trainlaunch_file_{re.sub(r'[^0-9A-Za-z_]', '_', stem)}_{digest}"
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise ComponentError(f"{what}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as e:
        del sys.modules[modname]
        raise _load_failed(what, e) from e
    return module


def _import(name: str, module: str, cwd: str) -> ModuleType | None:
    """Import an importable module, or None when no such module exists."""
    if not _findable(name, module):
        if cwd in sys.path:
            return None
        sys.path.append(cwd)  # the project directory, searched after everything else
        importlib.invalidate_caches()
        if not _findable(name, module):
            sys.path.remove(cwd)
            return None
    return _load(module, f"module {module!r} (component {name!r})")


def _findable(name: str, module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError as e:
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            return False  # a missing parent package: simply not found
        raise _load_failed(f"module {module!r} (component {name!r})", e) from e
    except (Exception, SystemExit) as e:  # a parent package raised while being imported
        raise _load_failed(f"module {module!r} (component {name!r})", e) from e


def _load(module: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except (Exception, SystemExit) as e:
        raise _load_failed(what, e) from e


def _load_failed(what: str, e: BaseException) -> ComponentError:
    """One line: what failed, the exception type and message, and where it was raised."""
    import traceback

    msg = (str(e).strip().splitlines() or [""])[0]
    where = ""
    frames = [
        f
        for f in traceback.extract_tb(e.__traceback__)
        if not f.filename.startswith("<frozen") and "importlib" not in f.filename
    ]
    if frames and not isinstance(e, SyntaxError):  # SyntaxError's message carries its line
        where = f" ({frames[-1].filename}:{frames[-1].lineno})"
    return ComponentError(
        f"loading {what} failed: {type(e).__name__}: {msg}{where}",
        hint="rerun with --debug for the traceback",
    )


def _function(name: str, module: ModuleType, attr: str, label: str = "") -> Callable[..., Any]:
    obj = getattr(module, attr, None)
    if obj is None:
        candidates = [
            k
            for k, v in vars(module).items()
            if callable(v) and not k.startswith("_") and not isinstance(v, type)
        ]
        import difflib

        close = difflib.get_close_matches(attr, candidates, n=1)
        hint = (
            f"did you mean {close[0]!r}?"
            if close
            else (f"functions there: {', '.join(sorted(candidates)[:12])}" if candidates else None)
        )
        label = label or f"module {module.__name__!r}"
        raise ComponentError(f"{label} has no function {attr!r} (component {name!r})", hint=hint)
    return _check_callable(name, obj)


def _check_callable(name: str, obj: Any) -> Callable[..., Any]:
    if not callable(obj) or isinstance(obj, type):
        raise ComponentError(f"component {name!r} is a {type(obj).__name__}, not a function")
    return obj


def _same_file(a: str | os.PathLike[str] | None, b: str | os.PathLike[str]) -> bool:
    if not a:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _describe_unimported(module: str, attr: str) -> str:
    """A function's first docstring line, found without importing (empty if not cheap)."""
    path = _module_file(module)
    if path is None or "." in attr:
        return ""
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return ""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == attr:
            return first_line(ast.get_docstring(node))
    return ""


def _module_file(module: str) -> Path | None:
    parts = module.split(".")
    for entry in sys.path:
        base = Path(entry or ".")
        for part in parts[:-1]:
            base = base / part
        for candidate in (base / f"{parts[-1]}.py", base / parts[-1] / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None
