"""JSON Lines encoding for metric records: the fast path, the general path, tensors, timestamps.

Policy (documented in docs/rank-library.md):

* Non-finite floats are written as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``:
  every line stays strict JSON (JS ``JSON.parse`` accepts it), a divergence stays visible (``null``
  would look like a missing value), and Python's ``float()`` reads the strings back.
* numpy scalars and arrays become Python numbers and lists; CPU tensors are converted when the
  record is logged; tensors on other devices are converted in batches when the buffer drains.
* Anything else raises ``TypeError`` naming the metric, before the record is buffered.

Neither torch nor numpy is imported here: a value can only be a tensor (or numpy object) if the
caller already imported the library, so ``sys.modules`` tells us what to check against.
"""

from __future__ import annotations

import json.encoder
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

HEADER_FIELDS = ("step", "epoch", "timestamp")
NUMERIC = frozenset({int, float})  # exact types whose repr() is already valid JSON

# The C string escaper when the _json extension is built (it always is in CPython).
_quote: Callable[[str], str] = (
    getattr(json.encoder, "c_encode_basestring", None) or json.encoder.py_encode_basestring
)
_NONFINITE = {math.inf: '"Infinity"', -math.inf: '"-Infinity"'}
_ts_cache: tuple[int, str] = (-1, "")


def utc_timestamp() -> str:
    """Now as ISO-8601 UTC with milliseconds and ``Z`` (``2026-11-29T20:29:07.207Z``)."""
    global _ts_cache
    now = time.time()
    second = int(now)
    cached = _ts_cache
    if cached[0] != second:  # strftime costs ~1.5 us; it only changes once a second
        cached = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        _ts_cache = cached
    return f"{cached[1]}.{int((now - second) * 1000):03d}Z"


class Schema:
    """The compiled line template for one ordered tuple of metric names."""

    __slots__ = ("names", "keys", "rank", "template", "text_template")

    def __init__(self, names: tuple[str, ...], rank: int | None) -> None:
        reserved = HEADER_FIELDS if rank is None else (*HEADER_FIELDS, "rank")
        for name in names:
            if type(name) is not str:
                raise TypeError(f"metric names must be str, got {name!r}")
            if name in reserved:
                raise ValueError(
                    f"metric name {name!r} collides with the record header field of that name; "
                    f"rename the metric (e.g. 'train_{name}')"
                )
        self.names = names
        self.keys = [_quote(name) for name in names]
        self.rank = rank
        rank_part = "" if rank is None else f',"rank":{rank:d}'
        # '%' inside a metric name must not be read as a conversion by the % operator.
        body = "".join(f",{key.replace('%', '%%')}:%r" for key in self.keys)
        # For (step, epoch, timestamp, *values, schema id): exact ints, a timestamp that needs no
        # escaping and finite floats, as the renderer checks; %.0s prints the id as nothing.
        self.template = '{"step":%r,"epoch":%r,"timestamp":"%s"' + rank_part + body + "}\n%.0s"
        # The same line, as bytes, for fields already rendered as JSON text (orjson's output,
        # the timestamp quoted): see _render._render_run_orjson.
        text_body = "".join(f",{key.replace('%', '%%')}:%s" for key in self.keys)
        text = '{"step":%s,"epoch":%s,"timestamp":%s' + rank_part + text_body + "}\n%.0s"
        self.text_template = text.encode()

    def line(self, header: tuple[Any, Any, Any], values: Sequence[Any]) -> str:
        """One record through the general path (any value :func:`encode_value` accepts)."""
        body = "".join(
            f",{key}:{encode_value(name, value)}"
            for key, name, value in zip(self.keys, self.names, values, strict=True)
        )
        return f"{opening(*header, self.rank)}{body}}}\n"


def opening(step: Any, epoch: Any, timestamp: Any, rank: int | None) -> str:
    """The header fields of a record line, without the closing brace."""
    rank_part = "" if rank is None else f',"rank":{rank:d}'
    return (
        f'{{"step":{encode_value("step", step)},"epoch":{encode_value("epoch", epoch)},'
        f'"timestamp":{encode_value("timestamp", timestamp)}{rank_part}'
    )


def encode_value(name: str, value: Any) -> str:
    """``value`` as strict JSON text under the module's policy; TypeError names the metric."""
    kind = type(value)
    if kind is float:
        if value - value == 0.0:  # finite
            return float.__repr__(value)
        return _NONFINITE.get(value, '"NaN"')
    if kind is str:
        return _quote(value)
    if value is None or kind is bool:
        return "null" if value is None else ("true" if value else "false")
    if kind is int:
        try:
            return int.__repr__(value)
        except ValueError:  # more digits than sys.get_int_max_str_digits() allows
            raise ValueError(f"metric {name!r}: integer too large to write") from None
    return _encode_other(name, value)


def _encode_other(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):  # IntEnum, numpy ints are not int subclasses but handled below
        return int.__repr__(int(value))
    if isinstance(value, float):  # np.float64 is a float subclass with a non-JSON repr
        return encode_value(name, float(value))
    if isinstance(value, str):
        return _quote(str(value))
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, (np.generic, np.ndarray)):
        if value.dtype.kind in "biufUO":
            return encode_value(name, value.tolist())  # .tolist() is .item() for scalars
        raise TypeError(f"metric {name!r}: numpy dtype {value.dtype} is not JSON-serialisable")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        check_tensor(name, value)
        return encode_value(name, value.detach().tolist())
    if isinstance(value, Mapping):
        items = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"metric {name!r}: nested keys must be str, got {key!r}")
            items.append(f"{_quote(key)}:{encode_value(name, item)}")
        return "{" + ",".join(items) + "}"
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return "[" + ",".join([encode_value(name, item) for item in value]) + "]"
    raise TypeError(
        f"metric {name!r}: value of type {type(value).__name__} is not JSON-serialisable "
        "(use numbers, str, bool, None, lists, dicts, numpy or torch values)"
    )


def check_tensor(name: str, tensor: Any) -> None:
    """Reject tensors whose values JSON cannot hold, before they are buffered."""
    torch = sys.modules["torch"]
    if tensor.is_complex() or tensor.is_quantized or tensor.layout != torch.strided:
        raise TypeError(
            f"metric {name!r}: tensor of dtype {tensor.dtype} and layout {tensor.layout} "
            "is not JSON-serialisable"
        )


_MISSING = object()
TENSOR = "tensor"  # converter marker: the value is a tensor and needs the device check
_converters: dict[type, Any] = {}


def normalize(names: tuple[str, ...], values: list[Any]) -> dict[int, Any]:
    """Turn numpy scalars and CPU tensors in ``values`` into Python values, in place.

    Returns ``{index: tensor}`` for tensors on another device (left in place), which the caller
    copies and converts later in one batch: converting them here would sync per value.
    """
    on_device: dict[int, Any] = {}
    for i, value in enumerate(values):
        kind = type(value)
        if kind is float or kind is int:
            continue
        convert = _converters.get(kind, _MISSING)
        if convert is _MISSING:
            convert = _converters[kind] = _find_converter(kind)
        if convert is None:
            continue  # encode_value decides (str, None, lists, ... or a TypeError)
        if convert is TENSOR:
            if value.is_cpu:
                try:
                    values[i] = value.tolist()  # no sync on the CPU; works with requires_grad
                except (RuntimeError, TypeError) as error:
                    message = f"metric {names[i]!r}: tensor is not convertible: {error}"
                    raise TypeError(message) from error
            else:
                on_device[i] = value  # checked per stacked block by the caller
        else:
            values[i] = convert(value)
    return on_device


def _find_converter(kind: type) -> Any:
    np = sys.modules.get("numpy")
    if np is not None and issubclass(kind, np.generic):
        # float() and int() are ~20x cheaper than numpy's .item() on a numpy scalar.
        return {"f": float, "i": int, "u": int, "b": bool}.get(np.dtype(kind).kind)
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(kind, torch.Tensor):
        return TENSOR
    return None
