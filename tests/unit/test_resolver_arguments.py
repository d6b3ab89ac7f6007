"""Signature -> command line: every type, option spellings, *args, defaults, help text."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from trainlaunch.errors import ComponentError
from trainlaunch.resolver import Component, HelpRequested, find_component

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "components"
FILECOMPS = FIXTURES / "filecomps"
IMPORTABLE = FIXTURES / "importable"


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


def comp(fn: str) -> Component:
    return find_component(f"comps.py:{fn}", cwd=str(FILECOMPS))


def typed(*argv: str, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """Materialize comps.py:typed (which needs --name) and return the kwargs it received."""
    app = comp("typed").materialize(["--name", "n", *argv], defaults)
    return dict(app.metadata["kwargs"])


def launch(*argv: str, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    c = find_component("tlfix_pkg.comps.launch", cwd=str(IMPORTABLE))
    return dict(c.materialize(list(argv), defaults).metadata["kwargs"])


# --- types ----------------------------------------------------------------------------------


def test_defaults_when_nothing_is_given() -> None:
    kw = typed()
    assert kw == {
        "name": "n",
        "count": 1,
        "rate": 0.5,
        "debug": False,
        "maybe": None,
        "union": None,
        "tags": None,
        "ints": None,
        "pair": (),
        "env": None,
        "limits": None,
        "mode": "fast",
        "color": kw["color"],
        "x": 0,
        "foo_bar": "",
        "verbose": None,
    }
    assert kw["color"].name == "RED"


def test_scalars() -> None:
    kw = typed("--count", "3", "--rate", "1e-3", "--maybe", "5", "--union", "u")
    assert (kw["count"], kw["rate"], kw["maybe"], kw["union"]) == (3, 0.001, 5, "u")


def test_bool_flags() -> None:
    assert typed("--debug")["debug"] is True
    assert typed("--no-debug")["debug"] is False
    assert typed("--debug=false")["debug"] is False
    assert typed("--debug=yes")["debug"] is True
    assert typed("--verbose")["verbose"] is True  # Optional[bool]: None until given
    assert typed("--no_verbose")["verbose"] is False


def test_lists_are_repeatable_and_comma_separated() -> None:
    assert typed("--tags", "a,b", "--tags", "c")["tags"] == ["a", "b", "c"]
    assert typed("--tags", "")["tags"] == []
    assert typed("--ints", "1, 2", "--ints=3")["ints"] == [1, 2, 3]
    assert typed("--pair", "4,5")["pair"] == (4, 5)


def test_dicts() -> None:
    assert typed("--env", "A=1,B=x=y")["env"] == {"A": "1", "B": "x=y"}
    assert typed("--env", "A=1", "--env", "B=2,A=3")["env"] == {"A": "3", "B": "2"}
    # a segment without '=' continues the previous value (lists inside env values)
    assert typed("--env", "HOSTS=a,b,c,D=1")["env"] == {"HOSTS": "a,b,c", "D": "1"}
    assert typed("--limits", "cpu=2")["limits"] == {"cpu": 2}


def test_choices() -> None:
    assert typed("--mode", "slow")["mode"] == "slow"
    assert typed("--color", "GREEN")["color"].name == "GREEN"
    assert typed("--color", "green")["color"].name == "GREEN"  # by value too


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--count", "three"],
            "bad value for --count of component 'comps.py:typed': expected an integer, got 'three'",
        ),
        (
            ["--rate", "fast"],
            "bad value for --rate of component 'comps.py:typed': expected a number, got 'fast'",
        ),
        (
            ["--mode", "medium"],
            "bad value for --mode of component 'comps.py:typed': expected one of "
            "fast, slow, got 'medium'",
        ),
        (["--color", "BLUE"], "expected one of RED, GREEN, got 'BLUE'"),
        (["--env", "novalue"], "expected KEY=VALUE, got 'novalue'"),
        (["--ints", "1,x"], "expected an integer, got 'x'"),
        (["--debug=maybe"], "expected true or false, got 'maybe'"),
        (["--no-debug=1"], "option --no-debug takes no value"),
    ],
)
def test_bad_values(argv: list[str], message: str) -> None:
    with pytest.raises(ComponentError) as e:
        typed(*argv)
    assert message in str(e.value)


def test_negative_numbers_are_values() -> None:
    assert typed("--count", "-3")["count"] == -3


def test_untyped_parameters_take_their_defaults_type() -> None:
    kw = dict(comp("untyped").materialize(["--count", "4", "--anything", "z"]).metadata["kwargs"])
    assert kw == {"count": 4, "label": "x", "anything": "z"}


def test_decorated_component_uses_the_real_signature() -> None:
    c = comp("decorated")
    assert c.description.startswith("A decorated component")
    assert c.materialize(["--steps", "5"]).metadata["kwargs"] == {"steps": 5}


# --- option spellings -----------------------------------------------------------------------


def test_dash_and_underscore_spellings_and_equals() -> None:
    assert typed("--foo-bar", "a")["foo_bar"] == "a"
    assert typed("--foo_bar", "b")["foo_bar"] == "b"
    assert typed("--foo-bar=c")["foo_bar"] == "c"


def test_single_letter_options() -> None:
    assert typed("-x", "2")["x"] == 2
    assert typed("--x", "3")["x"] == 3
    assert typed("-x4")["x"] == 4


def test_aliases_from_the_module() -> None:
    assert launch("--nproc", "8")["nproc_per_node"] == 8
    assert launch("--nproc-per-node", "2")["nproc_per_node"] == 2
    assert launch("-g", "1")["gpus"] == 1
    assert launch("-j", "2x4")["j"] == "2x4"
    with pytest.raises(ComponentError, match="given more than once"):
        launch("--nproc", "8", "--nproc_per_node", "2")


def test_unknown_option_suggests_the_close_one() -> None:
    with pytest.raises(ComponentError) as e:
        launch("--nprc", "8")
    assert str(e.value) == "unknown option --nprc for component 'tlfix_pkg.comps.launch'"
    assert "did you mean --nproc?" in (e.value.hint or "")


def test_scalar_given_twice_is_an_error() -> None:
    with pytest.raises(ComponentError, match="option --count given more than once"):
        typed("--count", "1", "--count", "2")


def test_option_without_its_value() -> None:
    with pytest.raises(ComponentError, match=r"option --count needs a value \(INT\)"):
        typed("--count")


def test_missing_required_options_are_all_named() -> None:
    with pytest.raises(ComponentError) as e:
        comp("required_two").materialize([])
    assert str(e.value) == "component 'comps.py:required_two' needs --alpha, --beta"


# --- *args ----------------------------------------------------------------------------------


def test_first_positional_and_everything_after_go_to_args() -> None:
    kw = launch("--nproc", "8", "train.py", "--lr", "0.1", "--nproc", "2")
    assert kw["script_args"] == ("train.py", "--lr", "0.1", "--nproc", "2")
    assert kw["nproc_per_node"] == 8


def test_double_dash_ends_the_options() -> None:
    kw = launch("--script", "train.py", "--", "--lr", "0.1")
    assert (kw["script"], kw["script_args"]) == ("train.py", ("--lr", "0.1"))
    # after the first positional a later -- is an ordinary argument
    assert launch("train.py", "--", "x")["script_args"] == ("train.py", "--", "x")


def test_help_after_the_first_positional_belongs_to_the_script() -> None:
    assert launch("train.py", "--help")["script_args"] == ("train.py", "--help")


def test_positional_for_a_component_without_args() -> None:
    with pytest.raises(ComponentError) as e:
        comp("greet").materialize(["bob"])
    assert str(e.value) == "component 'comps.py:greet' takes no positional arguments, got 'bob'"


def test_parameter_before_star_args_is_passed_positionally() -> None:
    kw = comp("positional_first").materialize(["--first", "a", "--flag", "b", "c"]).metadata
    assert dict(kw["kwargs"]) == {"first": "a", "rest": ("b", "c"), "flag": True}


# --- defaults from config -------------------------------------------------------------------


def test_config_defaults_fill_what_the_command_line_leaves_out() -> None:
    kw = typed(
        "--count",
        "9",
        defaults={
            "count": 5,
            "rate": 2,
            "tags": ["t"],
            "env": {"A": "1"},
            "debug": "true",
            "mode": "slow",
            "color": "GREEN",
            "foo-bar": "fb",
        },
    )
    assert kw["count"] == 9  # the explicit command-line value wins (TorchX #1389)
    assert (kw["rate"], kw["tags"], kw["env"], kw["debug"]) == (2.0, ["t"], {"A": "1"}, True)
    assert (kw["mode"], kw["color"].name, kw["foo_bar"]) == ("slow", "GREEN", "fb")


def test_explicit_value_equal_to_the_default_still_beats_config() -> None:
    assert typed("--count", "1", defaults={"count": 5})["count"] == 1
    assert typed("--no-debug", defaults={"debug": True})["debug"] is False


def test_config_can_supply_a_required_option() -> None:
    app = comp("required_two").materialize(["--beta", "2"], {"alpha": "from config"})
    assert dict(app.metadata["kwargs"]) == {"alpha": "from config", "beta": 2}


def test_config_aliases_and_args() -> None:
    kw = launch(defaults={"nproc": 4, "script_args": ["a.py", "--x"]})
    assert (kw["nproc_per_node"], kw["script_args"]) == (4, ("a.py", "--x"))
    assert launch("b.py", defaults={"script_args": ["a.py"]})["script_args"] == ("b.py",)


def test_unknown_config_key_is_an_error() -> None:
    with pytest.raises(ComponentError) as e:
        typed(defaults={"cnt": 1})
    assert str(e.value) == "config sets unknown option 'cnt' for component 'comps.py:typed'"
    assert "count" in (e.value.hint or "")


def test_bad_config_value_is_an_error() -> None:
    with pytest.raises(
        ComponentError,
        match="bad config default count = 'many' for component "
        "'comps.py:typed': expected an integer",
    ):
        typed(defaults={"count": "many"})
    with pytest.raises(ComponentError, match="expected an integer, got True"):
        typed(defaults={"count": True})


def test_programmatic_call() -> None:
    app = comp("typed").call({"name": "p", "count": "3", "tags": ["a"]}, {"rate": 1.5})
    kw = dict(app.metadata["kwargs"])
    assert (kw["name"], kw["count"], kw["tags"], kw["rate"]) == ("p", 3, ["a"], 1.5)


# --- help -----------------------------------------------------------------------------------


def test_help_flags_raise_help_requested() -> None:
    for flag in ("-h", "--help"):
        with pytest.raises(HelpRequested) as e:
            typed(flag)
        assert e.value.text == comp("typed").help_text()


def test_help_text_lists_every_option() -> None:
    text = comp("typed").help_text()
    assert text.startswith("usage: trainlaunch run comps.py:typed --name STR [options]\n")
    assert "Every supported parameter type.\n\nA second paragraph of description." in text
    expected = [
        "--name STR",
        "the run name (required)",
        "--count INT",
        "how many (a continuation line) (default: 1)",
        "--rate FLOAT",
        "(default: 0.5)",
        "--debug / --no-debug",
        "debug mode (default: off)",
        "--tags STR[,STR...]",
        "repeatable or comma-separated",
        "--env KEY=VALUE[,...]",
        "--limits STR=INT[,...]",
        "--mode {fast,slow}",
        "(default: fast)",
        "--color {RED,GREEN}",
        "(default: RED)",
        "-x, --x INT",
        "--foo-bar STR",
        "-h, --help",
    ]
    for piece in expected:
        assert piece in text, piece
    assert "Returns" not in text


def test_help_text_shows_args_and_aliases() -> None:
    text = find_component("tlfix_pkg.comps.launch", cwd=str(IMPORTABLE)).help_text()
    assert "usage: trainlaunch run tlfix_pkg.comps.launch [options] [--] [SCRIPT_ARGS ...]" in text
    assert "SCRIPT_ARGS ..." in text and "the script and its arguments" in text
    assert "--nproc-per-node, --nproc INT" in text
    assert "-g, --gpus, " not in text and "-g, --gpus INT" in text


def test_a_real_no_parameter_beats_a_generated_negation() -> None:
    kw = dict(comp("negation").materialize(["--no-python"]).metadata["kwargs"])
    assert kw == {"python": True, "no_python": True}
    kw = dict(comp("negation").materialize(["--no_python", "--python=false"]).metadata["kwargs"])
    assert kw == {"python": False, "no_python": True}
