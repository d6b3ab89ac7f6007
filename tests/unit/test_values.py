"""@frozen is a frozen dataclass to everyone who uses one: the same answers as
``dataclasses.dataclass(frozen=True)`` for the same class body, and no code compiled at import."""

from __future__ import annotations

import builtins
import copy
import dataclasses
import pickle
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from trainlaunch.values import frozen


def _body(decorate: Callable[[type], type]) -> type:
    class Point:
        """A point."""

        x: int
        y: int = 0
        tags: Mapping[str, str] = dataclasses.field(default_factory=dict)
        note: str = dataclasses.field(default="", compare=False, repr=False)

    Point.__qualname__ = "Point"
    return decorate(Point)


Ours = _body(frozen)
Stdlib = _body(dataclasses.dataclass(frozen=True))
CASES: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((1,), {}),
    ((1, 2), {}),
    ((), {"x": 1, "y": 2}),
    ((1,), {"tags": {"a": "b"}, "note": "n"}),
    ((1, 2, {"k": "v"}, "n"), {}),
]


@pytest.mark.parametrize(("args", "kwargs"), CASES)
def test_the_same_answers_as_a_frozen_dataclass(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    ours, theirs = Ours(*args, **kwargs), Stdlib(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    assert [f.name for f in dataclasses.fields(ours)] == [
        f.name for f in dataclasses.fields(theirs)
    ]
    assert ours == Ours(*args, **kwargs) and ours != theirs  # another class is never equal
    assert dataclasses.replace(ours, note="other") == ours  # note is compare=False
    assert dataclasses.replace(ours, y=99) != ours
    assert Ours.__match_args__ == Stdlib.__match_args__
    assert dataclasses.is_dataclass(ours)


@frozen
class Pair:
    """Hashable fields only (module level: pickle finds it by name)."""

    a: int
    b: tuple[str, ...] = ()
    why: str = dataclasses.field(default="", compare=False)


def test_hash_follows_the_compared_fields() -> None:
    one, two = Pair(1, ("x",), why="one"), Pair(1, ("x",), why="two")
    assert hash(one) == hash(two) and len({one, two}) == 1 and Pair(2) not in {one}
    with pytest.raises(TypeError, match="unhashable"):  # as the stdlib's: a dict field
        hash(Ours(1))
    with pytest.raises(TypeError, match="unhashable"):
        hash(Stdlib(1))


def test_frozen() -> None:
    p = Ours(1)
    with pytest.raises(dataclasses.FrozenInstanceError, match="'x'"):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del p.y  # type: ignore[misc]
    assert p.x == 1


def test_each_instance_gets_its_own_default_from_a_factory() -> None:
    a, b = Ours(1), Ours(1)
    assert a.tags == {} and a.tags is not b.tags


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, r"missing required arguments: 'x'"),
        ((1, 2, {}, "n", "extra"), {}, r"takes 4 positional arguments but 5 were given"),
        ((1,), {"z": 3}, r"unexpected keyword argument 'z'"),
        ((1,), {"x": 3}, r"multiple values for argument 'x'"),
    ],
)
def test_wrong_arguments_are_a_type_error_like_the_stdlibs(
    args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        Ours(*args, **kwargs)
    with pytest.raises(TypeError):
        Stdlib(*args, **kwargs)


def test_post_init_validates_and_may_set_with_object_setattr() -> None:
    @frozen
    class Name:
        """A name, stripped."""

        text: str

        def __post_init__(self) -> None:
            if not self.text.strip():
                raise ValueError("empty")
            object.__setattr__(self, "text", self.text.strip())

    assert Name(" a ").text == "a"
    with pytest.raises(ValueError, match="empty"):
        Name(" ")


def test_copies_and_pickles_round_trip() -> None:
    p = Pair(1, ("x",), "why")
    assert copy.copy(p) == p and copy.deepcopy(p) == p
    back = pickle.loads(pickle.dumps(p))  # noqa: S301 (our own bytes)
    assert back == p and back.why == "why"


def test_what_it_does_not_take_is_refused_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match="does not take field"):

        @frozen
        class Hidden:
            """A field outside __init__."""

            a: int = dataclasses.field(default=0, init=False)

    with pytest.raises(TypeError, match="does not take field"):

        @frozen
        class Late:
            """An InitVar (fields() leaves it out: it would be dropped without a word)."""

            a: int
            b: dataclasses.InitVar[int] = 0

    with pytest.raises(TypeError, match=r"writes Own.__init__"):

        @frozen
        class Own:
            """Its own __init__."""

            a: int

            def __init__(self) -> None:
                pass


def test_no_code_is_compiled_when_a_class_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[str] = []
    real_exec = builtins.exec

    def spy(source: Any, *args: Any, **kwargs: Any) -> Any:
        compiled.append(str(source)[:40])
        return real_exec(source, *args, **kwargs)

    monkeypatch.setattr(builtins, "exec", spy)
    _body(frozen)
    assert compiled == []
    _body(dataclasses.dataclass(frozen=True))  # the spy sees the stdlib's
    assert compiled


LAZY_CHECK = r'''
import sys
from typing import ClassVar

from trainlaunch.values import frozen


@frozen
class Base:
    """A base."""

    x: int
    y: str = "s"
    kind: ClassVar[str] = "base"


@frozen
class Child(Base):
    """A child."""

    z: tuple = ()


c = Child(1, z=(2,))
made = (repr(c), c == Child(1, "s", (2,)), hash(c) == hash(Child(1, "s", (2,))), Child.__match_args__)
try:
    @frozen
    class Bad:
        """A mutable default."""

        items: list = []
except ValueError as e:
    mutable = str(e)
assert "dataclasses" not in sys.modules, "made and used without the stdlib"

import dataclasses


@dataclasses.dataclass(frozen=True)
class Twin:
    """What the stdlib makes of Child's body."""

    x: int
    y: str = "s"
    kind: ClassVar[str] = "base"
    z: tuple = ()


t = Twin(1, z=(2,))
assert made == ("Child(x=1, y='s', z=(2,))", True, True, ("x", "y", "z")), made
assert [(f.name, f.default) for f in dataclasses.fields(c)] == [
    (f.name, f.default) for f in dataclasses.fields(t)
]
assert dataclasses.asdict(c) == dataclasses.asdict(t)
assert dataclasses.replace(c, x=5) == Child(5, z=(2,))
assert dataclasses.is_dataclass(Child) and dataclasses.is_dataclass(c)
assert Child.kind == "base" and "kind" not in [f.name for f in dataclasses.fields(Child)]
try:
    c.x = 2
except dataclasses.FrozenInstanceError:
    pass
else:
    raise AssertionError("assigned")
assert mutable == (
    "mutable default <class 'list'> for field items is not allowed: use default_factory"
), mutable
print("ok")
'''


def test_made_without_importing_dataclasses_and_the_same_once_it_is() -> None:
    """Where no module imported dataclasses yet, @frozen reads the body itself (the
    supervisor's and the node agent's start skip ~10 ms of imports); the stdlib's records
    appear, the same, when first asked for."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", LAZY_CHECK], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_plain_body_is_read_without_the_stdlib_and_answers_the_same() -> None:
    """No dataclasses.field in the body: @frozen reads it itself even where dataclasses is
    imported (this module imports it); the records appear, the same, when asked for."""

    def plain(decorate: Callable[[type], type]) -> type:
        class Size:
            """A size."""

            w: int
            h: int = 1
            unit: str = "px"

        return decorate(Size)

    ours, theirs = plain(frozen), plain(dataclasses.dataclass(frozen=True))
    assert not isinstance(vars(ours)["__dataclass_fields__"], dict)  # not made yet
    a, b = ours(2, unit="em"), theirs(2, unit="em")
    assert (repr(a), hash(a) == hash(ours(2, 1, "em"))) == (repr(b), True)
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert [f.name for f in dataclasses.fields(ours)] == ["w", "h", "unit"]
    assert dataclasses.replace(a, h=3) == ours(2, 3, "em")
    assert ours.__match_args__ == theirs.__match_args__
