"""Every public name of `trainlaunch` is what it says, however it is imported."""

from __future__ import annotations

import inspect
import subprocess
import sys
import types

import pytest

import trainlaunch

CLASSES = {
    "AppDef",
    "AppDryRunInfo",
    "AppState",
    "AppStatus",
    "RankSettings",
    "Resource",
    "RetryPolicy",
    "Role",
    "Runner",
    "macros",
    "runopts",
}
FUNCTIONS = {"get_runner"}


def test_all_is_exactly_the_documented_names() -> None:
    assert set(trainlaunch.__all__) == CLASSES | FUNCTIONS


@pytest.mark.parametrize("name", sorted(CLASSES | FUNCTIONS))
def test_public_name_is_a_class_or_function_after_every_submodule_is_loaded(name: str) -> None:
    # loading the submodules first is what made `trainlaunch.runopts` the module, not the class
    import trainlaunch.cli.boundary  # noqa: F401
    import trainlaunch.options  # noqa: F401
    import trainlaunch.runner  # noqa: F401
    import trainlaunch.specs  # noqa: F401

    value = getattr(trainlaunch, name)
    assert not isinstance(value, types.ModuleType)
    if name in CLASSES:
        assert inspect.isclass(value), name
    else:
        assert inspect.isfunction(value), name
    assert value.__doc__, f"{name} has no docstring"


def test_from_import_in_a_fresh_interpreter() -> None:
    names = ", ".join(sorted(CLASSES | FUNCTIONS))
    code = (
        "import inspect, trainlaunch.runner\n"
        f"from trainlaunch import {names}\n"
        "print(inspect.isclass(runopts), inspect.isclass(macros), callable(get_runner))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "True"]


def test_no_submodule_shadows_a_public_name() -> None:
    import pkgutil

    submodules = {m.name for m in pkgutil.iter_modules(trainlaunch.__path__)}
    assert not submodules & set(trainlaunch.__all__)
