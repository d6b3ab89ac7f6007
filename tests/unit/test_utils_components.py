"""The builtin utils components: what each builds, through the resolver as a user calls it."""

from __future__ import annotations

import sys

import pytest

from trainlaunch.errors import ComponentError
from trainlaunch.resolver import find_component, list_components
from trainlaunch.specs import AppDef, RetryPolicy, Role


def run(name: str, *argv: str) -> AppDef:
    return find_component(name).materialize(list(argv))


def role(name: str, *argv: str) -> Role:
    app = run(name, *argv)
    assert len(app.roles) == 1 and app.roles[0].name == app.name
    return app.roles[0]


UTILS = [n for n, _ in list_components() if n.startswith("utils.")]


def test_the_documented_set_exists() -> None:
    assert sorted(UTILS) == [
        "utils.binary",
        "utils.echo",
        "utils.exit",
        "utils.python",
        "utils.sh",
        "utils.sleep",
        "utils.touch",
    ]


@pytest.mark.parametrize("name", UTILS)
def test_every_option_is_documented(name: str) -> None:
    comp = find_component(name)
    spec = comp.spec()
    assert comp.description
    for opt in spec.options:
        assert opt.help, f"{name}: --{opt.param} has no help in the Args section"
    if spec.varargs is not None:
        assert spec.varargs.help, f"{name}: *{spec.varargs.param} has no help"
    assert "usage: trainlaunch run " + name in comp.help_text()


def test_echo() -> None:
    r = role("utils.echo")
    assert (r.entrypoint, r.args, r.num_replicas) == ("echo", ("hello world",), 1)
    r = role("utils.echo", "--msg", "hi there", "--num-replicas", "2", "--image", "img")
    assert (r.args, r.num_replicas, r.image) == (("hi there",), 2, "img")


def test_sh_joins_its_arguments_as_shell_text() -> None:
    r = role("utils.sh", "echo", "$TRAINLAUNCH_REPLICA_ID", "&&", "hostname")
    assert (r.entrypoint, r.args) == ("bash", ("-c", "echo $TRAINLAUNCH_REPLICA_ID && hostname"))
    r = role(
        "utils.sh",
        "--num-replicas",
        "3",
        "--cpu",
        "2",
        "--gpu",
        "1",
        "--memMB",
        "2048",
        "--env",
        "A=1,B=2",
        "--max-retries",
        "2",
        "--retry-policy",
        "REPLICA",
        "--",
        "--version",
    )
    assert r.args == ("-c", "--version")
    assert (r.num_replicas, r.max_retries, r.retry_policy) == (3, 2, RetryPolicy.REPLICA)
    assert (r.resource.cpu, r.resource.gpu, r.resource.memMB) == (2, 1, 2048)
    assert dict(r.env) == {"A": "1", "B": "2"}


def test_sh_needs_a_command() -> None:
    with pytest.raises(ComponentError, match="utils.sh needs a command"):
        run("utils.sh")


def test_python_module_code_and_script() -> None:
    r = role("utils.python", "-m", "pkg.train", "--", "--lr", "0.1")
    assert (r.name, r.entrypoint, r.args) == (
        "train",
        sys.executable,
        ("-m", "pkg.train", "--lr", "0.1"),
    )
    assert r.env["PYTHONUNBUFFERED"] == "1"
    r = role("utils.python", "-c", "print(1)")
    assert (r.name, r.args) == ("python", ("-c", "print(1)"))
    r = role("utils.python", "--script", "train.py", "--", "--epochs", "2")
    assert (r.name, r.args) == ("train", ("train.py", "--epochs", "2"))


def test_python_first_positional_is_the_script() -> None:
    r = role("utils.python", "--num-replicas", "2", "my train.py", "--lr", "0.1")
    assert r.args == ("my train.py", "--lr", "0.1")
    assert r.name == "my-train" and r.num_replicas == 2


def test_python_with_an_image_uses_the_images_python() -> None:
    r = role(
        "utils.python",
        "--image",
        "pytorch:2",
        "-c",
        "pass",
        "--name",
        "job",
        "--env",
        "PYTHONUNBUFFERED=0",
    )
    assert (r.entrypoint, r.name, r.env["PYTHONUNBUFFERED"]) == ("python", "job", "0")


def test_python_argument_errors() -> None:
    with pytest.raises(ComponentError, match=r"give only one of -m, -c, --script \(got -m, -c\)"):
        run("utils.python", "-m", "a", "-c", "b")
    with pytest.raises(ComponentError, match="needs a script, -m MODULE or -c CODE"):
        run("utils.python")


def test_binary() -> None:
    r = role("utils.binary", "--entrypoint", "/usr/bin/env", "true")
    assert (r.name, r.entrypoint, r.args) == ("env", "/usr/bin/env", ("true",))
    with pytest.raises(ComponentError, match="needs --entrypoint"):
        run("utils.binary", "x")


def test_touch() -> None:
    r = role("utils.touch", "--file", "/tmp/x")
    assert (r.entrypoint, r.args) == ("touch", ("/tmp/x",))
    with pytest.raises(ComponentError, match="needs --file"):
        run("utils.touch")


def test_sleep() -> None:
    assert role("utils.sleep").args == ("60",)
    assert role("utils.sleep", "--seconds", "0.25", "--num-replicas", "2").args == ("0.25",)
    assert role("utils.sleep", "--seconds", "0").args == ("0",)
    with pytest.raises(ComponentError, match="seconds must be >= 0"):
        run("utils.sleep", "--seconds", "-1")


def test_exit() -> None:
    r = role("utils.exit", "--code", "3", "--num-replicas", "2")
    assert (r.entrypoint, r.args, r.num_replicas) == ("sh", ("-c", "exit 3"), 2)
    assert role("utils.exit").args == ("-c", "exit 0")
    with pytest.raises(ComponentError, match=r"code must be in 0..255, got 256"):
        run("utils.exit", "--code", "256")
