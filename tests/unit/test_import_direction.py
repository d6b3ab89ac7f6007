"""The import direction of the whole house (STYLE.md section 1), read from every module's ast.

``errors <- specs <- settings, store <- resolver, schedulers/* <- runner <- cli/*``; ``rank/*``
imports only settings, errors and torch/numpy; only ``cli/`` imports click/rich; no backend
imports ``agent/``; backends do not import each other. Lazy imports (inside functions) count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# a module may import only from layers strictly below its own (or from its own package)
LAYERS: dict[str, int] = {
    "errors": 0,
    "handles": 1,  # the handle grammar: part of the nouns, below specs
    "options": 1,  # runopts (typed scheduler options): part of the nouns, below specs
    "specs": 2,
    "settings": 3,
    "store": 4,
    "stacks": 2,  # stack dumps as values (pure)
    "devices": 4,  # torch-free machine facts (GPUs, CPUs)
    "stackdump": 4,  # runs py-spy to collect stacks
    "agent_record": 4,  # agent.json: written by the agent, read by backends
    "procs": 4,  # process helpers shared by the supervisor and the agent
    "interleave": 4,  # stdout+stderr lines in arrival order (supervisor and agent)
    "redact": 4,
    "metrics_reader": 4,
    "sweeps": 4,  # a sweep's points (pure grid / random search)
    "compare": 5,  # several apps' metrics side by side
    "metrics_summary": 5,  # the latest values per rank, on top of metrics_reader
    "snapshot": 4,  # the code snapshot a local/Slurm app runs from
    "rerun": 6,  # an app rebuilt from its record (what the runner reruns)
    "agent": 5,  # the node agent: the job-side program
    "resolver": 5,
    "schedulers": 5,
    "components": 6,  # builtin components build AppDefs (dist.ddp renders the agent's flags)
    "config": 6,  # reads the scheduler registry's names and aliases
    "runner": 7,
    "sweep_runs": 8,  # runs a sweep's points through the runner
    "cli": 9,
    "__init__": 10,  # the public API: lazy re-exports
    "__main__": 10,
}
BACKENDS = {"local", "slurm", "kubernetes"}
ONLY_CLI = {"click", "rich"}
HEAVY = {"torch", "numpy"}
RANK_MAY_IMPORT = {"settings", "errors", "rank"}

# justified exceptions: (importer, imported) -> why
EXCEPTIONS: dict[tuple[str, str], str] = {}


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


def violations() -> list[str]:
    bad = []
    for name, path in modules():
        layer = LAYERS.get(top(name))
        for imported in sorted(imports(path, name)):
            ours = imported.startswith("trainlaunch.")
            target = imported.removeprefix("trainlaunch.")
            why = None
            if top(imported) in ONLY_CLI and top(name) != "cli":
                why = f"only cli/ imports {top(imported)}"
            elif top(imported) in HEAVY and top(name) != "rank":
                why = f"only rank/ imports {top(imported)}"
            elif top(name) == "rank" and ours and top(target) not in RANK_MAY_IMPORT:
                why = "rank/ imports only settings and errors"
            elif top(name) == "schedulers" and ours and top(target) == "agent":
                why = "no backend imports agent/"
            elif backend_of(name) and backend_of(target) and backend_of(name) != backend_of(target):
                why = "a backend does not import another backend"
            elif ours and top(name) != "rank" and top(target) != top(name):
                want = LAYERS.get(top(target))
                if layer is None or want is None:
                    why = f"layer unknown: add {top(name)!r}/{top(target)!r} to LAYERS"
                elif want >= layer:
                    why = f"layer {top(name)} ({layer}) imports {top(target)} ({want})"
            if why and (name, target) not in EXCEPTIONS:
                bad.append(f"{name} -> {imported}: {why}")
    return bad


def test_every_module_imports_only_downwards() -> None:
    assert violations() == []


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


# justified (or not yet fixed) cycles: frozenset of modules -> why
KNOWN_CYCLES: dict[frozenset[str], str] = {}


def test_no_import_cycles_even_through_lazy_imports() -> None:
    # lazy imports count (a cycle hidden in a function is still a cycle); TYPE_CHECKING ones not
    found = [c for c in cycles(module_edges()) if frozenset(c) not in KNOWN_CYCLES]
    assert found == []
