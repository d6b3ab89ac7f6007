"""Backends declare what they offer; the declaration matches what they do, and cli/ never names
a backend (it asks the registry and the capabilities)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from trainlaunch import schedulers
from trainlaunch.errors import ExitCode, Unsupported
from trainlaunch.schedulers.api import Scheduler
from trainlaunch.specs import AppDef, Role, SlotGroup

REPO = Path(__file__).resolve().parents[2]
BUILTINS = sorted(schedulers.BUILTIN_SCHEDULERS)
MEMBERS = {  # capability -> the optional member a backend overrides to offer it
    "logs": "log_iter",
    "requeue": "requeue",
    "arrays": "submit_array_dryrun",
}
OPTIONS = {"snapshots": "snapshot", "hang_watchdog": "hang_timeout"}


@pytest.mark.parametrize("name", BUILTINS)
def test_each_backend_declares_what_it_does(name: str) -> None:
    sched = schedulers.get_scheduler(name, "s")
    caps = schedulers.capabilities_of(name)
    assert sched.capabilities == caps  # the class says what its module declares
    for capability, member in MEMBERS.items():
        overridden = getattr(type(sched), member) is not getattr(Scheduler, member)
        assert getattr(caps, capability) == overridden, (name, capability)
    for capability, option in OPTIONS.items():
        assert getattr(caps, capability) == (option in sched.run_opts()), (name, capability)


@pytest.mark.parametrize("name", BUILTINS)
def test_what_a_backend_leaves_out_raises_unsupported_with_exit_3(name: str) -> None:
    sched = schedulers.get_scheduler(name, "s")
    caps = sched.capabilities
    calls = {
        "requeue": lambda: sched.requeue("default:app-1"),
        "stacks": lambda: sched.stacks("default:app-1"),
        "arrays": lambda: sched.schedule_array(None),  # type: ignore[arg-type]
    }
    for capability, call in calls.items():
        if getattr(caps, capability):
            continue
        with pytest.raises(Unsupported) as e:
            call()
        assert e.value.exit_code == ExitCode.SCHEDULER and "\n" not in e.value.message
        assert e.value.hint  # who can (the base class's), or what to do instead


def test_the_registry_names_who_can() -> None:
    requeue, arrays = schedulers.with_capability("requeue"), schedulers.with_capability("arrays")
    assert requeue[:2] == ["local", "slurm"] and "kubernetes" not in requeue  # registry order
    assert "local" in schedulers.with_capability("slot_groups") and "local" not in arrays
    assert {"slurm", "kubernetes"} <= set(arrays)


def test_only_a_backend_with_slot_groups_turns_one_into_slots(tmp_path: Path) -> None:
    app = SlotGroup("exp-7", 2).tag(AppDef("a", (Role("r", "true"),)))
    assert SlotGroup.of(app) == SlotGroup("exp-7", 2)
    local = schedulers.get_scheduler("local", "s", environ={"TRAINLAUNCH_HOME": str(tmp_path)})
    request = local.submit_dryrun(app, local.run_opts().resolve({})).request
    assert request["slots"] == {"dir": str(tmp_path / "slots" / "exp-7"), "count": 2}
    plain = local.submit_dryrun(AppDef("a", (Role("r", "true"),)), local.run_opts().resolve({}))
    assert "slots" not in plain.request
    for bad in (("../x", 1), ("ok", 0)):
        with pytest.raises(Exception, match="slot group"):
            SlotGroup(*bad)


BACKEND_WORDS = set(schedulers.BUILTIN_SCHEDULERS) | set(schedulers.ALIASES)


def _strings_naming_backends(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            words = {w.strip(".,;:()`'\"").lower() for w in node.value.split()}
            hit = words & BACKEND_WORDS
            if hit:
                found.append(f"{path.name}:{node.lineno}: {sorted(hit)} in {node.value[:60]!r}")
    return found


def test_no_cli_module_names_a_backend() -> None:
    # comparisons, defaults and help texts alike: the CLI asks the registry and capabilities
    found = [
        s
        for p in sorted((REPO / "trainlaunch" / "cli").glob("*.py"))
        for s in _strings_naming_backends(p)
    ]
    assert found == []
