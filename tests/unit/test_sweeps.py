"""The pure sweep core: parsing, expansion, placeholder substitution."""

from __future__ import annotations

import math

import pytest

from trainlaunch.errors import UsageError
from trainlaunch.sweeps import grammar as sweeps


def test_grid_times_seeds_in_order() -> None:
    params = [sweeps.parse_param("lr=0.1,0.01,0.001"), sweeps.parse_param("bs=8,16")]
    points = sweeps.expand(params, sweeps.parse_seeds("1,2"))
    assert len(points) == 12
    assert [p.index for p in points] == list(range(12))
    assert points[0].values() == {"lr": "0.1", "bs": "8", "seed": "1"}
    assert points[1].values() == {"lr": "0.1", "bs": "8", "seed": "2"}
    assert points[-1].values() == {"lr": "0.001", "bs": "16", "seed": "2"}


def test_seeds_only_sweep() -> None:
    points = sweeps.expand([], (3, 4))
    assert [(p.params, p.seed) for p in points] == [({}, 3), ({}, 4)]


@pytest.mark.parametrize(
    "text",
    [
        "lr",
        "=1,2",
        "lr=",
        "lr=1,,2",
        "lr=1,1",
        "9x=1",
        "lr=1:0",
        "lr=0:1:cubic",
        "lr=0:1:log",
        "lr=1:inf",
    ],
)
def test_bad_params_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        sweeps.parse_param(text)


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("t=00:10:00", ("00:10:00",)),  # a time, not a range (it was refused)
        ("ep=host:80,host:81", ("host:80", "host:81")),
        ("lr=a:b", ("a:b",)),
        ("x= a , b ", (" a ", " b ")),  # byte for byte: no whitespace stripped
        ("x=a\\,b,c", ("a,b", "c")),  # \, is a comma inside a value
        ("x=1\\:2", ("1:2",)),  # \: keeps a numeric pair a value
        ("x=a\\\\,c\\d", ("a\\", "c\\d")),  # \\ is a backslash; other \ stay
    ],
)
def test_values_are_taken_as_written_with_a_quoting_rule(
    text: str, values: tuple[str, ...]
) -> None:
    # issue 23 #20: values were stripped, a value with ':' taken as a range, no way to a comma
    param = sweeps.parse_param(text)
    assert not param.is_range and param.values == values
    points = sweeps.expand([param])
    args = sweeps.substitute(["--v={" + param.name + "}"], points[0].values())
    assert args == [f"--v={values[0]}"]


@pytest.mark.parametrize("text", ["1,x", "1,1", "-1", "2147483648"])
def test_bad_seeds(text: str) -> None:
    with pytest.raises(UsageError):
        sweeps.parse_seeds(text)


def test_range_needs_random_and_random_is_reproducible() -> None:
    lr = sweeps.parse_param("lr=1e-4:1e-1:log")
    assert lr.is_range and lr.scale == "log"
    with pytest.raises(UsageError, match="--random"):
        sweeps.expand([lr])
    a = sweeps.expand([lr, sweeps.parse_param("n=1:100:int")], random_n=20, rng_seed=7)
    b = sweeps.expand([lr, sweeps.parse_param("n=1:100:int")], random_n=20, rng_seed=7)
    assert [p.params for p in a] == [p.params for p in b]
    for p in a:
        assert 1e-4 <= float(p.params["lr"]) <= 1e-1
        assert p.params["n"].isdigit() and 1 <= int(p.params["n"]) <= 100
    logs = [math.log10(float(p.params["lr"])) for p in a]
    assert min(logs) < -2.5 and max(logs) > -2.5  # log-uniform spreads over the decades


def test_nothing_or_too_much_to_sweep() -> None:
    with pytest.raises(UsageError, match="nothing to sweep"):
        sweeps.expand([])
    with pytest.raises(UsageError, match="at most"):
        sweeps.expand([sweeps.parse_param("a=" + ",".join(map(str, range(sweeps.MAX_POINTS + 1))))])
    with pytest.raises(UsageError, match="twice"):
        sweeps.expand([sweeps.parse_param("a=1"), sweeps.parse_param("a=2")])
    with pytest.raises(UsageError, match="clashes"):
        sweeps.expand([sweeps.parse_param("seed=1")], (1,))


def test_substitute_placeholders_and_escapes() -> None:
    args = ["--lr", "{lr}", "--name=run-{lr}-{seed}", "{{lr}}", '{"a": 1}', "}}{{"]
    out = sweeps.substitute(args, {"lr": "0.1", "seed": "3"})
    assert out == ["--lr", "0.1", "--name=run-0.1-3", "{lr}", '{"a": 1}', "}{"]
    assert args[1] == "{lr}"  # the input is not changed


def test_unknown_placeholder_and_unused_param_say_did_you_mean() -> None:
    with pytest.raises(UsageError) as e:
        sweeps.check_placeholders(["--lr", "{lrr}"], ["lr"])
    assert "{lrr}" in str(e.value) and "did you mean {lr}" in (e.value.hint or "")
    with pytest.raises(UsageError) as e:
        sweeps.check_placeholders(["--lr", "0.1"], ["lr"])
    assert "not used" in str(e.value)
    sweeps.check_placeholders(["--lr", "{lr}"], ["lr", "seed"])  # {seed} is optional


def test_sweep_ids() -> None:
    sid = sweeps.new_sweep_id()
    assert sweeps.check_sweep_id(sid) == sid
    for bad in ["", "../x", "ABCDEFGHIJ", "abc"]:
        with pytest.raises(UsageError):
            sweeps.check_sweep_id(bad)
