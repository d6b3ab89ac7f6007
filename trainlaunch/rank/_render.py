"""Turning a drained buffer into text: bulk formatting, device tensors in one batch.

Buffer entries come in three kinds:

* ``(step, epoch, timestamp, *values, schema_id)``, all exact ints, floats and str: the fast
  path. A run of them is checked and formatted with a few C-level passes and one ``%``
  operation for the whole run (the template's trailing ``%.0s`` swallows the schema id);
  per-record Python work is what made logging slow. A run that fails the checks (a NaN, a str
  value, a timestamp needing escapes) is written record by record through the general path.
* a ``str``: a line already rendered when it was logged (numpy values, CPU tensors, lists...).
* a :class:`Deferred`: a line with holes for values on an accelerator, filled in here with one
  host copy per (device, dtype) for the whole buffer.
"""

from __future__ import annotations

import itertools
import operator
import re
import sys
from collections.abc import Sequence
from typing import Any

from trainlaunch.rank import _encode

_orjson: Any
try:  # a serializer written for speed: float formatting is most of a record's cost
    import orjson as _orjson
except ImportError:  # pragma: no cover - a dependency; without it the stdlib path is used
    _orjson = None

Entry = Any  # one of the three kinds above
_UNSAFE_IN_STRING = re.compile(r'["\\\x00-\x1f]')  # what a JSON string cannot hold unescaped
_ONLY_TUPLES = {tuple}
_schema_id_of = operator.itemgetter(-1)
_stamp_of = operator.itemgetter(2)
_values_of = operator.itemgetter(slice(3, -1))


class Deferred:
    """A record line with holes where device values go, filled in when the buffer drains."""

    __slots__ = ("parts", "holes", "blocks")

    def __init__(
        self, parts: list[str], holes: list[tuple[int, str]], blocks: list[tuple[Any, list[int]]]
    ) -> None:
        self.parts = parts
        self.holes = holes  # (index into parts, metric name), one per device value
        self.blocks = blocks  # (stacked copy of some values, their indices into holes)


def _run_key(entry: Entry) -> int | None:
    return entry[-1] if type(entry) is tuple else None


def render(
    entries: Sequence[Entry], schemas: Sequence[_encode.Schema]
) -> tuple[str, Exception | None]:
    """The text of ``entries`` (one line each, in order) and the first record error, if any.

    A record that cannot be written is left out and its error returned, so that one bad value
    costs one record and one exception, never the rest of the buffer.
    """
    kinds = set(map(type, entries))
    if kinds == _ONLY_TUPLES and len(set(map(_schema_id_of, entries))) == 1:
        return _render_run(schemas[entries[0][-1]], entries)  # the usual buffer: one schema
    if Deferred in kinds:
        _fill_device_values([e for e in entries if type(e) is Deferred])
    out: list[str] = []
    first_error: Exception | None = None
    for schema_id, group in itertools.groupby(entries, _run_key):
        if schema_id is None:
            out.extend(e if type(e) is str else "".join(e.parts) for e in group)
            continue
        text, error = _render_run(schemas[schema_id], list(group))
        out.append(text)
        first_error = first_error or error
    return "".join(out), first_error


def _render_run(schema: _encode.Schema, run: Sequence[Entry]) -> tuple[str, Exception | None]:
    if _orjson is not None:
        text = _render_run_orjson(schema, run)
        if text is not None:
            return text, None
    try:
        total = sum(itertools.chain.from_iterable(map(_values_of, run)))
        usable = total - total == 0  # NaN or +-Inf anywhere makes this NaN
    except (OverflowError, TypeError):  # an int too large for a float; a str value
        usable = False
    if usable and not _UNSAFE_IN_STRING.search("".join(map(_stamp_of, run))):
        try:
            return (schema.template * len(run)) % tuple(itertools.chain.from_iterable(run)), None
        except ValueError:
            pass  # an int too long to print: find it record by record below
    lines: list[str] = []
    first_error: Exception | None = None
    for entry in run:
        try:
            lines.append(schema.line(entry[:3], entry[3:-1]))
        except (TypeError, ValueError) as error:
            first_error = first_error or error
    return "".join(lines), first_error


def _render_run_orjson(schema: _encode.Schema, run: Sequence[Entry]) -> str | None:
    """A run of fast-path records through orjson: one C call formats every field.

    The whole run is serialised as one flat JSON array, split on commas and poured into the
    schema's text template. orjson writes the shortest round-trip form of each float, as
    ``repr`` does, only spelled differently at times (``0.00001`` for ``1e-05``: the same
    number), and escapes the timestamps itself. None sends the run to the stdlib path, which
    writes non-finite values as strings and ints beyond 64 bits:

    * orjson writes NaN and +-Infinity as ``null``: an ``n`` in the text (numbers have none,
      default timestamps neither; a timestamp with one only costs the slower path);
    * a comma inside a timestamp makes more pieces than fields;
    * an int beyond 64 bits, or a lone surrogate in a timestamp, raises.
    """
    try:
        flat = _orjson.dumps(list(itertools.chain.from_iterable(run)))
    except _orjson.JSONEncodeError:
        return None
    if b"n" in flat:
        return None
    fields = flat[1:-1].split(b",")
    if len(fields) != len(run) * len(run[0]):
        return None
    return ((schema.text_template * len(run)) % tuple(fields)).decode()


def _fill_device_values(deferred: list[Deferred]) -> None:
    blocks = [(entry, block, indices) for entry in deferred for block, indices in entry.blocks]
    values = tensors_to_python([block for _, block, _ in blocks])
    for (entry, _, indices), block_values in zip(blocks, values, strict=True):
        for hole, value in zip(indices, block_values, strict=True):
            index, name = entry.holes[hole]
            entry.parts[index] = _encode.encode_value(name, value)


def tensors_to_python(tensors: Sequence[Any]) -> list[Any]:
    """Python values of ``tensors`` (scalar for 0-d, nested lists otherwise), in order.

    One host copy per (device, dtype) group: equal shapes are stacked, mixed shapes are
    flattened and concatenated, then split again on the CPU, where splitting costs no sync.
    Dtypes are never mixed, so an int tensor never comes back as a float.
    """
    if not tensors:
        return []
    torch = sys.modules["torch"]
    groups: dict[tuple[Any, Any], list[int]] = {}
    for index, tensor in enumerate(tensors):
        groups.setdefault((tensor.device, tensor.dtype), []).append(index)
    out: list[Any] = [None] * len(tensors)
    with torch.no_grad():
        for indices in groups.values():
            members = [tensors[i] for i in indices]
            shape = members[0].shape
            if all(t.shape == shape for t in members):
                values = torch.stack(members).cpu().tolist()
            else:
                flat = torch.cat([t.reshape(-1) for t in members]).cpu()
                parts = torch.split(flat, [t.numel() for t in members])
                values = [
                    part.reshape(t.shape).tolist() for part, t in zip(parts, members, strict=True)
                ]
            for i, value in zip(indices, values, strict=True):
                out[i] = value
    return out
