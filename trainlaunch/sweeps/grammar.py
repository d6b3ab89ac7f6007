"""Sweeps, the pure part: parse ``--param``/``--seeds``/``--random``, expand to points, substitute.

Grammar (docs/sweeps.md):

* ``--param NAME=V1,V2,...``: a grid axis; values are strings, used byte for byte (``\\,``
  is a comma inside a value, ``\\:`` a colon, ``\\\\`` a backslash: split_values).
* ``--param NAME=LO:HI`` or ``NAME=LO:HI:log`` (also ``:lin``): a numeric range (LO and HI
  numbers; ``t=00:10:00`` is one value), only with ``--random N`` (uniform, or log-uniform
  with ``:log``; ``:int`` rounds to integers).
* ``--seeds 1,2,3``: every point runs once per seed; the seed is the injected rank seed and
  the ``{seed}`` placeholder.

``{NAME}`` in any component argument is replaced by the point's value; ``{{`` and ``}}`` are
literal braces; other braces (``{"a": 1}``) are kept as written. An unknown placeholder or a
parameter no argument uses is a UsageError with a did-you-mean hint.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from trainlaunch.errors import UsageError
from trainlaunch.handles import SWEEP_ID_RE, SWEEP_PREFIX, check_sweep_id  # the handle grammar
from trainlaunch.values import frozen

if TYPE_CHECKING:  # annotations only: random is imported where a random search draws
    import random

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
_PLACEHOLDER_RE = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"
SCALES = ("lin", "log", "int")
# LO:HI or LO:HI:scale, a range when LO and HI are numbers; else a value (t=00:10:00, a:b)
_RANGE_RE = re.compile(r"([^:,]+):([^:,]+)(?::([A-Za-z]+))?\Z")
MAX_POINTS = 10_000  # a typo in a grid is refused; a queued point costs a file (docs/sweeps.md)


@frozen
class Param:
    """One swept parameter: a list of values (grid) or a numeric range (random)."""

    name: str
    values: tuple[str, ...] = ()
    low: float = 0.0
    high: float = 0.0
    scale: str = ""  # "" for a value list, else one of SCALES

    @property
    def is_range(self) -> bool:
        """True for LO:HI[:scale]."""
        return bool(self.scale)


@frozen
class SweepPoint:
    """One app of the sweep: its parameter values and its seed."""

    index: int
    params: Mapping[str, str]
    seed: int | None = None

    def values(self) -> dict[str, str]:
        """The placeholder values: the params, plus ``seed`` when seeds are swept."""
        out = dict(self.params)
        if self.seed is not None:
            out["seed"] = str(self.seed)
        return out

    def to_dict(self) -> dict[str, object]:
        """JSON-able form (recorded in the app's metadata and the sweep record)."""
        return {"index": self.index, "params": dict(self.params), "seed": self.seed}


def new_sweep_id() -> str:
    """A fresh sweep id: 10 characters that are easy to read aloud."""
    import secrets  # imported when drawn: `status sweep:ID` only parses ids

    return "".join(secrets.choice(_ALPHABET) for _ in range(10))


def parse_param(text: str) -> Param:
    """Parse one ``--param NAME=V1,V2,...`` or ``NAME=LO:HI[:lin|log|int]``."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not NAME_RE.match(name):
        raise UsageError(
            f"malformed --param {text!r}: expected NAME=V1,V2,... or NAME=LO:HI[:log]",
            hint="NAME is letters, digits and '_' (used as {NAME} in the arguments)",
        )
    if not spec:
        raise UsageError(f"--param {name}: no values")
    bounds = _RANGE_RE.match(spec)
    if bounds and _is_number(bounds[1]) and _is_number(bounds[2]):
        return _parse_range(name, spec)
    values = split_values(spec)
    if any(v == "" for v in values):
        raise UsageError(f"--param {name}: empty value in {spec!r}")
    if len(set(values)) != len(values):
        raise UsageError(f"--param {name}: duplicate values in {spec!r}")
    return Param(name, values=values)


def split_values(spec: str) -> tuple[str, ...]:
    """``V1,V2,...`` as written, byte for byte (no whitespace stripped): ``\\,`` is a comma
    inside a value, ``\\:`` a colon that never makes a range, ``\\\\`` a backslash; any
    other character, a backslash before any other one included, stays as it is."""
    values, value, i = [], [], 0
    while i < len(spec):
        if spec[i] == "\\" and spec[i + 1 : i + 2] in (",", ":", "\\"):
            value.append(spec[i + 1])
            i += 2
            continue
        if spec[i] == ",":
            values.append("".join(value))
            value = []
        else:
            value.append(spec[i])
        i += 1
    return (*values, "".join(value))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _parse_range(name: str, spec: str) -> Param:
    parts = spec.split(":")
    scale = parts[2] if len(parts) == 3 else "lin"
    if len(parts) not in (2, 3) or scale not in SCALES:
        raise UsageError(
            f"--param {name}: malformed range {spec!r}", hint="write LO:HI, LO:HI:log or LO:HI:int"
        )
    try:
        low, high = float(parts[0]), float(parts[1])
    except ValueError:
        raise UsageError(f"--param {name}: range bounds must be numbers, got {spec!r}") from None
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise UsageError(f"--param {name}: range needs finite LO < HI, got {spec!r}")
    if scale == "log" and low <= 0:
        raise UsageError(f"--param {name}: a log range needs LO > 0, got {spec!r}")
    return Param(name, low=low, high=high, scale=scale)


def parse_seeds(text: str | None) -> tuple[int, ...]:
    """``1,2,3`` -> (1, 2, 3); ``None`` -> () (no seed axis)."""
    if text is None:
        return ()
    try:
        seeds = tuple(int(s) for s in text.split(","))
    except ValueError:
        raise UsageError(f"malformed --seeds {text!r}: expected integers like 1,2,3") from None
    if len(set(seeds)) != len(seeds) or any(s < 0 or s >= 2**31 for s in seeds):
        raise UsageError(f"--seeds {text!r}: seeds must be distinct and in 0..2^31-1")
    return seeds


def expand(
    params: Sequence[Param],
    seeds: Sequence[int] = (),
    random_n: int | None = None,
    rng_seed: int = 0,
) -> list[SweepPoint]:
    """Every point: the grid (params in order, seeds innermost) or ``random_n`` samples."""
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise UsageError(f"a parameter is swept twice: {', '.join(names)}")
    if seeds and "seed" in names:
        raise UsageError("--param seed clashes with --seeds", hint="use --seeds for seeds")
    if random_n is None:
        ranged = [p.name for p in params if p.is_range]
        if ranged:
            raise UsageError(
                f"--param {ranged[0]} is a range: ranges need --random N",
                hint="list values (NAME=V1,V2) for a grid",
            )
        combos = [
            dict(zip(names, vs, strict=True))
            for vs in itertools.product(*(p.values for p in params))
        ]
    else:
        if random_n < 1:
            raise UsageError(f"--random must be >= 1, got {random_n}")
        import random  # only a random search draws: `status SWEEP` never imports it

        rng = random.Random(rng_seed)
        combos = [{p.name: _sample(p, rng) for p in params} for _ in range(random_n)]
    seed_axis: Sequence[int | None] = list(seeds) or [None]
    points = [
        SweepPoint(i, combo, seed)
        for i, (combo, seed) in enumerate(itertools.product(combos, seed_axis))
    ]
    if not params and not seeds:
        raise UsageError("nothing to sweep", hint="add --param NAME=V1,V2 and/or --seeds 1,2")
    if len(points) > MAX_POINTS:
        raise UsageError(f"the sweep has {len(points)} points; at most {MAX_POINTS}")
    return points


def _sample(p: Param, rng: random.Random) -> str:
    if not p.is_range:
        return rng.choice(p.values)
    if p.scale == "log":
        value = math.exp(rng.uniform(math.log(p.low), math.log(p.high)))
    else:
        value = rng.uniform(p.low, p.high)
    return str(round(value)) if p.scale == "int" else f"{value:.6g}"


def placeholders(args: Sequence[str]) -> set[str]:
    """The ``{NAME}`` placeholders used in args."""
    return {m.group(1) for a in args for m in _PLACEHOLDER_RE.finditer(a) if m.group(1)}


def check_placeholders(args: Sequence[str], names: Sequence[str]) -> None:
    """UsageError for an unknown placeholder or a parameter no argument uses."""
    used, known = placeholders(args), set(names)
    for name in sorted(used - known):
        raise UsageError(
            f"unknown placeholder {{{name}}} in the component's arguments",
            hint=_did_you_mean(name, known) or "write {{ and }} for literal braces",
        )
    for name in [n for n in names if n not in used and n != "seed"]:
        raise UsageError(
            f"--param {name} is not used: no argument contains {{{name}}}",
            hint=_did_you_mean(name, used) or f"put {{{name}}} where the value goes",
        )


def _did_you_mean(name: str, choices: set[str]) -> str:
    import difflib  # only on a usage error

    close = difflib.get_close_matches(name, sorted(choices), n=1)
    return f"did you mean {{{close[0]}}}?" if close else ""


def substitute(args: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """args with ``{NAME}`` replaced, ``{{``/``}}`` unescaped (KeyError-free: checked first)."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "{{":
            return "{"
        if m.group(0) == "}}":
            return "}"
        if m.group(1) not in values:
            raise UsageError(f"unknown placeholder {{{m.group(1)}}}")
        return values[m.group(1)]

    return [_PLACEHOLDER_RE.sub(one, a) for a in args]


def point_label(point: SweepPoint) -> str:
    """``lr=0.1 seed=1``: how a point is shown."""
    return " ".join(f"{k}={v}" for k, v in point.values().items())


__all__ = [
    "SWEEP_ID_RE",
    "SWEEP_PREFIX",
    "Param",
    "SweepPoint",
    "check_placeholders",
    "check_sweep_id",
    "expand",
    "new_sweep_id",
    "parse_param",
    "parse_seeds",
    "placeholders",
    "point_label",
    "substitute",
]
