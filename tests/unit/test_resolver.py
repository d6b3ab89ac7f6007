"""Component resolution: the four name forms, their order, and every error a user can hit."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from trainlaunch.errors import ComponentError
from trainlaunch.resolver import find_component, list_components
from trainlaunch.specs import AppDef

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "components"
FILECOMPS = FIXTURES / "filecomps"
IMPORTABLE = FIXTURES / "importable"
PLUGIN = FIXTURES / "plugin"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def isolated_imports():
    """Undo what loading components does to sys.path and sys.modules."""
    path, modules = list(sys.path), set(sys.modules)
    yield
    sys.path[:] = path
    roots = (str(FIXTURES), tempfile.gettempdir())
    for name in set(sys.modules) - modules:
        file = getattr(sys.modules[name], "__file__", None) or ""
        if name.startswith("_trainlaunch_file_") or file.startswith(roots):
            del sys.modules[name]


def kwargs_of(app: AppDef) -> dict:
    return dict(app.metadata["kwargs"])


# --- builtins -------------------------------------------------------------------------------


def test_builtin_resolves_and_materializes() -> None:
    comp = find_component("utils.echo")
    assert comp.origin == "builtin"
    assert comp.description.startswith("Print a message")
    app = comp.materialize(["--msg", "hi"])
    assert app.roles[0].entrypoint == "echo" and app.roles[0].args == ("hi",)


def test_list_components_lists_builtins_with_descriptions() -> None:
    rows = dict(list_components())
    for name in (
        "utils.echo",
        "utils.sh",
        "utils.python",
        "utils.touch",
        "utils.sleep",
        "utils.binary",
        "utils.exit",
    ):
        assert rows[name], name


def test_list_components_imports_no_component_module() -> None:
    code = textwrap.dedent("""
        import json, sys
        from trainlaunch.resolver import list_components
        rows = list_components()
        loaded = [m for m in sys.modules if m.startswith("trainlaunch.components.")
                  or m.split(".")[0] in ("torch", "numpy", "click", "rich")]
        print(json.dumps({"rows": len(rows), "loaded": loaded}))
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    result = json.loads(out.stdout)
    assert result["rows"] >= 7 and result["loaded"] == []


def test_private_helpers_are_not_components() -> None:
    with pytest.raises(ComponentError, match="no component named 'utils._app'"):
        find_component("utils._app")


def test_builtin_typo_suggests_the_name() -> None:
    with pytest.raises(ComponentError) as e:
        find_component("utils.ecoh")
    assert str(e.value) == "no component named 'utils.ecoh'"
    assert "utils.echo" in (e.value.hint or "")


def test_bare_function_name_suggests_the_builtin() -> None:
    with pytest.raises(ComponentError) as e:
        find_component("echo")
    assert "utils.echo" in (e.value.hint or "")


def test_a_script_name_hints_at_utils_python() -> None:
    with pytest.raises(ComponentError) as e:
        find_component("train.py")
    assert "train.py:FUNCTION" in (e.value.hint or "") and "utils.python" in (e.value.hint or "")


def test_a_project_components_package_and_the_builtins_live_side_by_side(tmp_path: Path) -> None:
    # the builtins are trainlaunch.components: a project's own `components` package is the
    # user's, importable by its name, and never hides utils.echo or dist.ddp
    project = tmp_path / "project"
    (project / "components").mkdir(parents=True)
    (project / "components" / "__init__.py").write_text("")
    (project / "components" / "utils.py").write_text("raise RuntimeError('user utils ran')\n")
    (project / "components" / "train.py").write_text(
        textwrap.dedent("""
            from trainlaunch.specs import AppDef, Role

            def job(steps: int = 1) -> AppDef:
                \"\"\"The project's own component.\"\"\"
                return AppDef("job", [Role("trainer", "python", ["-c", f"print({steps})"])])
        """)
    )
    code = textwrap.dedent("""
        import json
        from trainlaunch.resolver import find_component
        own = find_component("components.train.job").materialize(["--steps", "3"])
        echo = find_component("utils.echo").materialize(["--msg", "hi"])
        ddp = find_component("dist.ddp").materialize(["train.py"])
        import components, trainlaunch.components
        print(json.dumps([own.roles[0].args, echo.roles[0].args, ddp.roles[0].name,
                          components.__file__, trainlaunch.components.__file__]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=project)
    assert proc.returncode == 0, proc.stderr
    own_args, echo_args, ddp_role, user_pkg, builtin_pkg = json.loads(proc.stdout)
    assert own_args == ["-c", "print(3)"]
    assert "hi" in echo_args
    assert ddp_role
    assert Path(user_pkg).parent == project / "components"
    assert Path(builtin_pkg).parent != project / "components"


# --- file components ------------------------------------------------------------------------


def test_file_component_relative_to_cwd_imports_its_sibling() -> None:
    comp = find_component("comps.py:greet", cwd=str(FILECOMPS))
    app = comp.materialize(["--who", "you"])
    assert app.roles[0].name == "worker"  # from helpers.py, the sibling module
    assert app.roles[0].args == ("hi from a sibling",)
    assert kwargs_of(app) == {"who": "you"}
    assert comp.origin == f"file {FILECOMPS / 'comps.py'}"


def test_file_component_is_a_real_module_and_runs_only_that_file() -> None:
    comp = find_component(f"{FILECOMPS / 'comps.py'}:greet", cwd="/")
    module = sys.modules[comp.fn.__module__]
    assert Path(module.__file__).resolve() == FILECOMPS / "comps.py"
    assert comp.fn.__module__ == "comps"  # its own name: siblings importing it get the same one
    assert "broken" not in sys.modules  # broken.py sits next to it and raises when executed


def test_file_component_loaded_twice_is_one_module() -> None:
    a = find_component("comps.py:greet", cwd=str(FILECOMPS))
    b = find_component("./comps.py:greet", cwd=str(FILECOMPS))
    assert a.fn is b.fn


def test_file_named_like_a_stdlib_module_gets_a_private_module_name(tmp_path: Path) -> None:
    (tmp_path / "json.py").write_text(
        textwrap.dedent("""
        from trainlaunch import specs

        def comp() -> specs.AppDef:
            return specs.AppDef("j", (specs.Role("r", "echo"),))
    """)
    )
    comp = find_component("json.py:comp", cwd=str(tmp_path))
    assert comp.fn.__module__.startswith("_trainlaunch_file_json_")
    assert sys.modules["json"] is json  # the stdlib module is untouched
    assert comp.materialize([]).name == "j"


def test_file_not_found() -> None:
    with pytest.raises(ComponentError) as e:
        find_component("nope.py:fn", cwd=str(FILECOMPS))
    assert str(e.value) == "component file 'nope.py' not found"
    assert str(FILECOMPS / "nope.py") in (e.value.hint or "")


def test_file_that_raises_on_import_shows_the_error_and_line() -> None:
    with pytest.raises(ComponentError) as e:
        find_component("broken.py:fn", cwd=str(FILECOMPS))
    msg = str(e.value)
    assert msg.startswith(
        "loading component file 'broken.py' failed: RuntimeError: broken.py was executed"
    )
    assert "broken.py:3)" in msg and "\n" not in msg


def test_file_with_a_syntax_error(tmp_path: Path) -> None:
    (tmp_path / "bad_syntax.py").write_text("def comp(:\n")
    with pytest.raises(ComponentError, match=r"SyntaxError: .*line 1"):
        find_component("bad_syntax.py:comp", cwd=str(tmp_path))


def test_file_without_that_function_suggests_one() -> None:
    with pytest.raises(ComponentError) as e:
        find_component("comps.py:gret", cwd=str(FILECOMPS))
    assert "has no function 'gret'" in str(e.value)
    assert "greet" in (e.value.hint or "")


def test_file_attribute_that_is_not_a_function() -> None:
    with pytest.raises(ComponentError, match="is a int, not a function"):
        find_component("comps.py:NOT_CALLABLE", cwd=str(FILECOMPS))


# --- importable modules ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tlfix_pkg.comps.launch", "tlfix_pkg.comps:launch"])
def test_importable_dotted_and_colon_forms(name: str, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(IMPORTABLE))
    comp = find_component(name)
    assert comp.origin == "module tlfix_pkg.comps"
    assert kwargs_of(comp.materialize(["--nproc", "4"]))["nproc_per_node"] == 4


def test_importable_module_in_the_current_directory() -> None:
    comp = find_component("tlfix_pkg.comps.launch", cwd=str(IMPORTABLE))
    assert comp.description.startswith("A ddp-like launcher")


def test_unknown_module_is_not_found() -> None:
    with pytest.raises(ComponentError, match="no component named 'tlfix_nothing.mod.fn'"):
        find_component("tlfix_nothing.mod.fn", cwd=str(IMPORTABLE))
    with pytest.raises(ComponentError, match="no module named 'tlfix_nothing.mod'"):
        find_component("tlfix_nothing.mod:fn", cwd=str(IMPORTABLE))


def test_module_that_fails_to_import_shows_why(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(IMPORTABLE))
    with pytest.raises(ComponentError) as e:
        find_component("tlfix_pkg.broken_import.comp")
    assert (
        "loading module 'tlfix_pkg.broken_import' (component "
        "'tlfix_pkg.broken_import.comp') failed: ModuleNotFoundError: No module named "
        "'tlfix_missing_dependency'"
    ) in str(e.value)


def test_module_without_that_function(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(IMPORTABLE))
    with pytest.raises(ComponentError) as e:
        find_component("tlfix_pkg.comps.lanch")
    assert str(e.value) == (
        "module 'tlfix_pkg.comps' has no function 'lanch' (component 'tlfix_pkg.comps.lanch')"
    )
    assert "launch" in (e.value.hint or "")


def test_bad_colon_names() -> None:
    for name in ("pkg.mod:", ":fn"):
        with pytest.raises(ComponentError, match="bad component name"):
            find_component(name)
    with pytest.raises(ComponentError, match="empty component name"):
        find_component(" ")


# --- entry points ---------------------------------------------------------------------------


def _install_dist_info(site: Path) -> None:
    """A real installed distribution: package files plus a .dist-info with entry_points.txt."""
    shutil.copytree(PLUGIN / "src" / "tlfix_plugin", site / "tlfix_plugin")
    info = site / "tlfix_plugin-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tlfix-plugin\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent("""
        [trainlaunch.components]
        tlfix.hello = tlfix_plugin:hello
        utils.echo = tlfix_plugin:fake_echo
        tlfix.missing = tlfix_plugin:no_such_function
    """)
    )


def test_entry_point_component(tmp_path: Path, monkeypatch) -> None:
    _install_dist_info(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    comp = find_component("tlfix.hello")
    assert comp.origin == "entry point tlfix_plugin:hello"
    assert comp.materialize(["--name", "ep"]).roles[0].args == ("hello ep",)


def test_entry_points_never_hide_builtins(tmp_path: Path, monkeypatch) -> None:
    _install_dist_info(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert find_component("utils.echo").origin == "builtin"
    rows = dict(list_components())
    assert rows["tlfix.hello"] == "Say hello from a plugin."  # read without importing
    assert rows["utils.echo"].startswith("Print a message")
    assert "tlfix_plugin" not in sys.modules


def test_entry_point_naming_a_missing_function(tmp_path: Path, monkeypatch) -> None:
    _install_dist_info(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ComponentError) as e:
        find_component("tlfix.missing")
    assert str(e.value) == (
        "entry point 'tlfix.missing' of distribution 'tlfix-plugin': "
        "'tlfix_plugin' has no attribute 'no_such_function'"
    )


def test_entry_point_typo_suggests_it(tmp_path: Path, monkeypatch) -> None:
    _install_dist_info(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ComponentError) as e:
        find_component("tlfix.helo")
    assert "tlfix.hello" in (e.value.hint or "")


def _can_build_wheels_offline() -> bool:
    """setuptools can build a wheel here without downloading anything."""
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


@pytest.mark.slow  # ~3 s: builds a wheel; the .dist-info tests above cover the logic quickly
def test_entry_point_from_a_pip_installed_package(tmp_path: Path) -> None:
    """Build and install the fixture plugin with pip, then resolve it in a fresh interpreter."""
    if not _can_build_wheels_offline():
        pytest.skip("needs setuptools>=70.1 or the wheel package (builds offline, no isolation)")
    target = tmp_path / "site"
    src = tmp_path / "plugin"
    shutil.copytree(PLUGIN, src)
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert pip.returncode == 0, pip.stderr
    code = (
        "from trainlaunch.resolver import find_component as f; "
        "c = f('tlfix.hello'); print(c.origin, c.materialize(['--name', 'pip']).roles[0].args)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(REPO)])}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    )
    assert out.stdout.strip() == "entry point tlfix_plugin:hello ('hello pip',)"


# --- calling the function -------------------------------------------------------------------


def test_not_an_appdef_says_what_it_returned() -> None:
    comp = find_component("comps.py:not_an_app", cwd=str(FILECOMPS))
    with pytest.raises(ComponentError) as e:
        comp.materialize(["--value", "7"])
    assert str(e.value) == "component 'comps.py:not_an_app' returned int 7, not an AppDef"


def test_component_that_raises() -> None:
    comp = find_component("comps.py:raises", cwd=str(FILECOMPS))
    with pytest.raises(ComponentError) as e:
        comp.materialize(["--value", "3"])
    assert str(e.value) == ("component 'comps.py:raises' raised ValueError: value 3 is not allowed")
    assert isinstance(e.value.__cause__, ValueError)


def test_component_building_an_invalid_role() -> None:
    comp = find_component("comps.py:bad_role", cwd=str(FILECOMPS))
    with pytest.raises(
        ComponentError,
        match=r"^component 'comps.py:bad_role': invalid role "
        r"name 'bad name!'",
    ):
        comp.materialize([])


def test_kwargs_component_is_rejected() -> None:
    comp = find_component("comps.py:kwargs_comp", cwd=str(FILECOMPS))
    with pytest.raises(ComponentError, match=r"takes \*\*options, which has no command-line"):
        comp.materialize([])


def test_unsupported_parameter_type_is_named() -> None:
    comp = find_component("comps.py:unsupported", cwd=str(FILECOMPS))
    with pytest.raises(ComponentError) as e:
        comp.help_text()
    assert str(e.value) == (
        "component 'comps.py:unsupported': parameter 'obj' has unsupported type set[int]"
    )
    assert "list[T]" in (e.value.hint or "")
