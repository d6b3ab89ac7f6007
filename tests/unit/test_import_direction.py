"""The import direction of the whole house (STYLE.md section 1), read from every module's ast.

``errors <- specs <- settings, store <- resolver, schedulers/* <- runner <- cli/*``; ``rank/*``
imports only settings, errors and torch/numpy; only ``cli/`` imports click/rich; no backend
imports ``agent/``, ``sweeps/``, ``cli/`` or another backend. Lazy imports (inside functions)
count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from trainlaunch.schedulers import BUILTIN_SCHEDULERS

REPO = Path(__file__).resolve().parents[2]

# a module may import only from layers strictly below its own (or from its own package)
LAYERS: dict[str, int] = {
    "errors": 0,
    "values": 0,  # @value: frozen dataclasses made without compiling code at import
    "handles": 1,  # the handle grammar: part of the nouns, below specs
    "ranklist": 1,  # the rank-list grammar (0,2-7)
    "options": 1,  # runopts (typed scheduler options): part of the nouns, below specs
    "specs": 2,
    "settings": 3,
    "diagnosis": 3,  # why a rank or an app failed: pure rules over the facts node/ gathers
    "store": 4,
    "node": 4,  # what runs on a node: processes, interleaved pipes, devices, agent.json
    "torch_plugin": 4,  # what torch imports at `import torch` (starts rank/recorder.py)
    "metrics": 4,  # reading the ranks' metrics files, summaries, comparisons
    "stacks": 5,  # stacks as values, the py-spy dump, rank progress, the one hang watchdog
    "preflight": 4,  # fingerprints, their comparison, bandwidth, the verdict (values)
    "rerun": 7,  # an app rebuilt from its record (what the runner reruns)
    "agent": 5,  # the node agent: the job-side program
    "resolver": 5,
    "schedulers": 6,
    "logmerge": 6,  # who wrote each log line, lines ranks share merged (reads agent flags)
    "components": 7,  # builtin components build AppDefs (dist.ddp renders the agent's flags)
    "config": 7,  # reads the scheduler registry's names and aliases
    "sweeps": 7,  # a sweep's points and record; the runner plans and submits them (Submitter)
    "runner": 8,
    "doctor": 8,  # this machine's checks: store, stacks, preflight, config, the backends' clients
    "cli": 10,
    "__init__": 11,  # the public API: lazy re-exports
    "__main__": 11,
}
BACKENDS = set(BUILTIN_SCHEDULERS)  # the registry's: a new backend needs no line here
ONLY_CLI = {"click", "rich"}
HEAVY = {"torch", "numpy"}
RANK_MAY_IMPORT = {"settings", "errors", "rank"}

# what a backend never imports: the node agent, the features above it, the CLI
NOT_FOR_BACKENDS = {"agent", "sweeps", "cli"}

# justified exceptions: (importer, imported) -> why
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("torch_plugin", "rank"): "torch's plugin hook: imports the rank side only when asked to",
}


def modules() -> list[tuple[str, Path]]:
    """(dotted name inside trainlaunch, path) of every module, components included."""
    out = []
    for path in sorted((REPO / "trainlaunch").rglob("*.py")):
        parts = path.relative_to(REPO / "trainlaunch").with_suffix("").parts
        out.append((".".join(p for p in parts if p != "__init__") or "__init__", path))
    for path in sorted((REPO / "components").glob("*.py")):
        out.append((".".join(("components", path.stem)).removesuffix(".__init__"), path))
    return out


def imports(path: Path, name: str) -> set[str]:
    """Absolute names of everything a module imports (trainlaunch. stripped), lazily or not."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name.rsplit(".", 1)[0] if path.name != "__init__.py" else name
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join([*base, node.module] if node.module else base)
                found.add(f"trainlaunch.{mod}")
            elif node.module == "trainlaunch":  # from trainlaunch import settings, store
                found |= {f"trainlaunch.{a.name}" for a in node.names}
            elif node.module:
                found.add(node.module)
    return found


def module_edges() -> dict[str, set[str]]:
    """Module -> the modules it imports (``from pkg import mod`` counted as pkg.mod)."""
    known = {f"trainlaunch.{n}" if n != "__init__" else "trainlaunch" for n, _ in modules()}
    known = {k.replace("trainlaunch.components.__init__", "trainlaunch.components") for k in known}
    edges: dict[str, set[str]] = {}
    for name, path in modules():
        me = f"trainlaunch.{name}" if name != "__init__" else "trainlaunch"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
        typing_only = {  # `if TYPE_CHECKING:` imports never run: no cycle at run time
            id(n)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING")
            for stmt in block.body
            for n in ast.walk(stmt)
        }
        out = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    out.add(sub if sub in known else base)
        edges[me] = {o for o in out if o in known and o != me}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def top(name: str) -> str:
    return name.split(".")[0]


def backend_of(name: str) -> str | None:
    parts = name.split(".")
    return (
        parts[1] if len(parts) > 2 and parts[0] == "schedulers" and parts[1] in BACKENDS else None
    )


def reason(name: str, imported: str) -> str | None:
    """Why module name may not import imported (an absolute module name), or None."""
    layer = LAYERS.get(top(name))
    ours = imported.startswith("trainlaunch.")
    target = imported.removeprefix("trainlaunch.")
    if top(imported) in ONLY_CLI and top(name) != "cli":
        return f"only cli/ imports {top(imported)}"
    if top(imported) in HEAVY and top(name) != "rank":
        return f"only rank/ imports {top(imported)}"
    if top(name) == "rank" and ours and top(target) not in RANK_MAY_IMPORT:
        return "rank/ imports only settings and errors"
    if top(name) == "schedulers" and ours and top(target) in NOT_FOR_BACKENDS:
        return f"no backend imports {top(target)}/"
    if backend_of(name) and backend_of(target) and backend_of(name) != backend_of(target):
        return "a backend does not import another backend"
    if ours and top(name) != "rank" and top(target) != top(name):
        want = LAYERS.get(top(target))
        if layer is None or want is None:
            return f"layer unknown: add {top(name)!r}/{top(target)!r} to LAYERS"
        if want >= layer:
            return f"layer {top(name)} ({layer}) imports {top(target)} ({want})"
    return None


def violations() -> list[str]:
    bad = []
    for name, path in modules():
        for imported in sorted(imports(path, name)):
            why = reason(name, imported)
            if why and (name, imported.removeprefix("trainlaunch.")) not in EXCEPTIONS:
                bad.append(f"{name} -> {imported}: {why}")
    return bad


def test_every_module_imports_only_downwards() -> None:
    assert violations() == []


@pytest.mark.parametrize(
    "importer,imported",
    [
        ("schedulers.local.backend", "trainlaunch.sweeps.grammar"),
        ("schedulers.slurm.array", "trainlaunch.cli.output"),
        ("schedulers.kubernetes.backend", "trainlaunch.schedulers.slurm.render"),
        ("schedulers.api", "trainlaunch.agent.plan"),
        ("sweeps.runs", "trainlaunch.runner"),
    ],
)
def test_what_no_backend_imports_is_refused(importer: str, imported: str) -> None:
    assert reason(importer, imported)
    assert reason("runner.api", "trainlaunch.sweeps.runs") is None  # the runner plans sweeps


def test_the_checker_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    f = tmp_path / "mod.py"
    f.write_text(
        "def f():\n    import rich\n    from .utils import x\n    from trainlaunch import cli\n"
    )
    assert imports(f, "components.dist") == {
        "rich",
        "trainlaunch.components.utils",
        "trainlaunch.cli",
    }


@pytest.mark.parametrize("name", sorted({top(n) for n, _ in modules()} - {"rank"}))
def test_every_top_level_module_has_a_layer(name: str) -> None:
    assert name in LAYERS


def test_the_top_level_holds_the_nouns_and_the_api_only() -> None:
    # issue 21: at most 12 flat modules; a feature is a package (sweeps/, metrics/, stacks/...)
    flat = sorted(p.stem for p in (REPO / "trainlaunch").glob("*.py"))
    assert len(flat) <= 12, flat


# justified (or not yet fixed) cycles: frozenset of modules -> why
KNOWN_CYCLES: dict[frozenset[str], str] = {}


def test_no_import_cycles_even_through_lazy_imports() -> None:
    # lazy imports count (a cycle hidden in a function is still a cycle); TYPE_CHECKING ones not
    found = [c for c in cycles(module_edges()) if frozenset(c) not in KNOWN_CYCLES]
    assert found == []
