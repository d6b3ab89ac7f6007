"""Handles and runopts: strict parsing."""

from __future__ import annotations

import pytest

from trainlaunch.errors import UsageError
from trainlaunch.handles import (
    AppHandle,
    SweepHandle,
    make_app_handle,
    parse_app_handle,
    parse_handle,
    parse_log_target,
)
from trainlaunch.options import runopts


@pytest.mark.parametrize(
    "text,expected",
    [
        ("local://trainlaunch/echo-abc", AppHandle("local", "trainlaunch", "echo-abc")),
        ("local:///echo-abc", AppHandle("local", "trainlaunch", "echo-abc")),
        ("slurm://s/1234", AppHandle("slurm", "s", "1234")),
        ("kubernetes://s/default:job-1", AppHandle("kubernetes", "s", "default:job-1")),
        ("echo-abc", AppHandle("local", "trainlaunch", "echo-abc")),
    ],
)
def test_parse_good_handles(text: str, expected: AppHandle) -> None:
    assert parse_app_handle(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        " local://s/a",
        "local://s/",
        "local://s/../x",
        "local://s/..",
        "local://s/a/b",
        "LOCAL://s/a",
        "local://s/a\0b",
        "local://s/.hidden",
        "local://s/a b",
        "/etc/passwd",
        "../../x",
        "local://s/a..b",
        "://s/a",
    ],
)
def test_parse_bad_handles(text: str) -> None:
    with pytest.raises(UsageError, match="malformed app handle|invalid app id"):
        parse_app_handle(text)


def test_make_handle_round_trip() -> None:
    h = make_app_handle("local", "trainlaunch", "a-1")
    assert str(parse_app_handle(h)) == h


def test_log_targets() -> None:
    t = parse_log_target("local://s/app-1/trainer/1,0")
    assert (t.handle.app_id, t.role, t.replicas) == ("app-1", "trainer", (0, 1))
    t = parse_log_target("app-1/trainer")
    assert (t.handle.app_id, t.role, t.replicas) == ("app-1", "trainer", None)
    for bad in ("local://s/app/r/x", "local://s/app/r/0/extra", "app//", "local://s/app/r/-1"):
        with pytest.raises(UsageError):
            parse_log_target(bad)


def opts() -> runopts:
    o = runopts()
    o.add("name", str, "a name", default="x")
    o.add("n", int, "a count", default=1)
    o.add("rate", float, "a rate")
    o.add("flag", bool, "a flag", default=False)
    o.add("items", list, "some items")
    o.add("labels", dict, "labels")
    o.add("req", str, "required", required=True)
    return o


def test_cfg_from_str_types_and_quotes() -> None:
    cfg = opts().cfg_from_str("name='a,b',n=3,rate=0.5,flag=true,items=a;b,labels=k:v;k2:v2,req=r")
    assert cfg == {
        "name": "a,b",
        "n": 3,
        "rate": 0.5,
        "flag": True,
        "items": ["a", "b"],
        "labels": {"k": "v", "k2": "v2"},
        "req": "r",
    }


@pytest.mark.parametrize(
    "text,needle",
    [
        ("bogus=1", "unknown option 'bogus'"),
        ("nam=1", "did you mean 'name'"),
        ("n=x", "expects an int"),
        ("flag=maybe", "expects a bool"),
        ("justtext", "expected key=value"),
        ("name='open", "unbalanced quote"),
        ("labels=novalue", "k:v"),
    ],
)
def test_cfg_errors(text: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        opts().cfg_from_str(text)


def test_resolve_fills_defaults_and_checks_required_and_types() -> None:
    o = opts()
    assert o.resolve({"req": "r"})["n"] == 1
    with pytest.raises(UsageError, match="missing required option 'req'"):
        o.resolve({})
    with pytest.raises(UsageError, match="expects int"):
        o.resolve({"req": "r", "n": 1.5})
    with pytest.raises(UsageError, match="valid options: flag, items, labels, n, name, rate, req"):
        o.resolve({"req": "r", "zzz": 1})


@pytest.mark.parametrize(
    "text,expected",
    [
        ("sweep:abcdefghij", SweepHandle("", "", "abcdefghij")),
        ("local://s/sweep:abcdefghij", SweepHandle("local", "s", "abcdefghij")),
        ("slurm:///sweep:abcdefghij", SweepHandle("slurm", "trainlaunch", "abcdefghij")),
        # not a well-formed sweep id: an app id (a Kubernetes namespace may be called "sweep")
        ("kubernetes://s/sweep:job-1", AppHandle("kubernetes", "s", "sweep:job-1")),
        ("sweep:ABC", AppHandle("local", "trainlaunch", "sweep:ABC")),
        ("echo-abc", AppHandle("local", "trainlaunch", "echo-abc")),
    ],
)
def test_one_parser_for_app_and_sweep_handles(text: str, expected: object) -> None:
    value = parse_handle(text)
    assert value == expected
    assert parse_handle(value) is value  # a value is never parsed again
    assert parse_handle(str(value)) == value  # its text round-trips


def test_sweep_handles_print_as_they_are_written() -> None:
    assert str(SweepHandle("local", "s", "abcdefghij")) == "local://s/sweep:abcdefghij"
    assert str(SweepHandle("", "", "abcdefghij")) == "sweep:abcdefghij"
    assert parse_log_target("sweep:abcdefghij/train/0").handle == SweepHandle("", "", "abcdefghij")
    with pytest.raises(UsageError, match="malformed app handle"):
        parse_handle("local://s/sweep:abcdefghij/x")


def test_choices_are_checked_by_the_schema_and_listed() -> None:
    o = runopts()
    o.add("on_hang", str, "after a hang", default="none", choices=("none", "stop", "restart"))
    assert o.resolve({"on_hang": "stop"})["on_hang"] == "stop"
    with pytest.raises(UsageError, match="on_hang must be one of none, stop, restart, got 'x'"):
        o.resolve({"on_hang": "x"})
    with pytest.raises(UsageError, match="on_hang must be one of"):
        o.cfg_from_str("on_hang=reboot")
    assert o.get("on_hang").choices == ("none", "stop", "restart")  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="not one of its choices"):
        o.add("x", str, "x", default="b", choices=("a",))
