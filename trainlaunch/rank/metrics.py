"""JSON Lines metric loggers (API of NeMo Automodel's ``metric_logger``), fixed and faster.

Each line is one strict-JSON object: ``{"step", "epoch", "timestamp"[, "rank"], <metrics>}``.

* A record is checked and copied when it is logged (numpy values and CPU tensors converted,
  accelerator values copied on the device), so a bad value raises ``TypeError`` at that call,
  naming the metric, and nothing is buffered; the logger keeps working. Later changes to the
  caller's sample or values are not seen. Plain numbers are formatted when the buffer drains.
* Non-finite floats become ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (see ``_encode``).
* A metric named like a header field raises ``ValueError`` instead of overwriting it.
* Records are buffered (``buffer_size``) and written whole lines per ``os.write``; the buffer
  reaches the file on a full buffer, ``flush()``, ``close()``, interpreter exit, garbage
  collection, and SIGTERM. ``flush`` (the constructor flag) fsyncs every buffer write;
  ``flush()`` (the method) always fsyncs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import operator
import os
import sys
import weakref
from types import TracebackType
from typing import Any

from trainlaunch.rank import _encode, _render, _sink
from trainlaunch.settings import METRIC_NAMES_SUFFIX

__all__ = [
    "DEFAULT_BUFFER_SIZE",
    "MetricLogger",
    "MetricLoggerDist",
    "MetricsSample",
    "NullMetricLogger",
    "build_metric_logger",
    "stack_and_move_tensor_metrics_to_cpu",
]

DEFAULT_BUFFER_SIZE = 100
_NUMBERS = _encode.NUMERIC  # exact types a fast-path record's values may have
_dtype_of = operator.attrgetter("dtype")
_MAX_SCHEMAS = 4096  # templates per logger; names that vary per record get none


@dataclasses.dataclass(slots=True)
class MetricsSample:
    """One metrics record; ``timestamp`` defaults to creation time (ISO-8601 UTC, ms, ``Z``)."""

    step: int
    epoch: int
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    timestamp: str | None = None

    def __post_init__(self) -> None:
        if self.timestamp is None:  # upstream overwrote a caller's timestamp; we keep it
            self.timestamp = _encode.utc_timestamp()

    def to_dict(self) -> dict[str, Any]:
        """The record as one flat dict; a metric named like a header field raises ValueError."""
        for name in _encode.HEADER_FIELDS:
            if name in self.metrics:
                raise ValueError(f"metric name {name!r} collides with the record header field")
        return {"step": self.step, "epoch": self.epoch, "timestamp": self.timestamp, **self.metrics}


def _check_buffer_size(buffer_size: int) -> None:
    if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 1:
        raise ValueError(f"buffer_size must be an integer >= 1, got {buffer_size!r}")


class MetricLogger:
    """Thread-safe, buffered JSON Lines logger; ``rank_field`` adds ``"rank": N`` to each line."""

    enabled = True

    def __init__(
        self,
        filepath: str | os.PathLike[str],
        flush: bool = False,
        append: bool = True,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        *,
        rank_field: int | None = None,
    ) -> None:
        _check_buffer_size(buffer_size)  # before opening: a bad argument must not leak an fd
        if rank_field is not None and (
            isinstance(rank_field, bool) or not isinstance(rank_field, int)
        ):
            raise ValueError(f"rank_field must be an integer or None, got {rank_field!r}")
        self.filepath = os.path.abspath(os.fspath(filepath))
        self.buffer_size = buffer_size
        self.fsync_on_write = bool(flush)  # not `self.flush`: that would shadow flush()
        self.rank_field = rank_field
        sink = _sink.Sink(self.filepath, append=append, fsync_each_write=self.fsync_on_write)
        self._schemas = sink.schemas  # shared with the drain, which formats by schema id
        self._schema_ids: dict[tuple[str, ...], int] = {}
        self._sink = sink
        self._entries = sink.entries
        self._lock = sink.lock
        self._finalizer = weakref.finalize(self, sink.close)  # also runs at interpreter exit
        self._names = _NameList(self.filepath + METRIC_NAMES_SUFFIX, append, rank_field)

    @property
    def closed(self) -> bool:
        """Whether the logger was closed."""
        return self._sink.closed

    def log(self, record: MetricsSample) -> None:
        """Buffer one record; a full buffer is written out. Raises if a value cannot be encoded."""
        # The fast path is inlined: per-record work is most of the cost of logging. A record of
        # exact ints and floats becomes one flat tuple (step, epoch, timestamp, *values, schema
        # id) that the drain checks and formats together with the rest of the buffer (see
        # _render). Such a tuple holds no container, so the garbage collector untracks it at
        # its first pass instead of promoting every buffered record to an older generation
        # (which measurably slowed logging). Everything else goes through _encode_record.
        entry: _render.Entry = None
        if type(record) is MetricsSample:
            metrics = record.metrics
            step, epoch, stamp = record.step, record.epoch, record.timestamp
            if (
                type(step) is int
                and type(epoch) is int
                and type(stamp) is str
                and _NUMBERS.issuperset(map(type, metrics.values()))
            ):
                names = tuple(metrics)
                schema_id = self._schema_ids.get(names)
                if schema_id is None:
                    schema_id = self._schema_id(names)
                if schema_id >= 0:
                    entry = (step, epoch, stamp, *metrics.values(), schema_id)
        if entry is None:
            entry = self._encode_record(record)  # outside the lock: it touches only this record
        # Buffered without the lock: list.append is atomic, and taking the lock for every record
        # cost a quarter of log(). The lock serialises drains; a closed sink is seen after the
        # append, which also settles a close() that another thread ran just before it.
        entries = self._entries
        entries.append(entry)
        if len(entries) >= self.buffer_size or self._sink.closed:
            self._drain_or_refuse(entry)

    def _drain_or_refuse(self, entry: _render.Entry) -> None:
        """Drain a full buffer; on a closed logger, take entry back (if unwritten) and raise."""
        try:
            with self._lock:
                sink = self._sink
                if not sink.closed:
                    if len(self._entries) >= self.buffer_size:  # another thread may have drained
                        sink.drain_locked()
                    return
                for i, buffered in enumerate(self._entries):
                    if buffered is entry:  # not written: close() drained before the append
                        del self._entries[i]
                        raise ValueError(f"log() on a closed MetricLogger ({self.filepath})")
                # not there: close() drained it with the rest, so it was logged before the close
        finally:
            if _sink._pending is not None:  # a SIGTERM arrived while we held the lock
                _sink.run_pending()

    def flush(self) -> None:
        """Write buffered records and fsync, whatever the ``flush`` constructor flag says."""
        self._sink.flush(fsync=True)

    def close(self) -> None:
        """Write buffered records and close the file; closing twice is harmless."""
        self._finalizer()  # runs Sink.close once and forgets it

    def __enter__(self) -> MetricLogger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- encoding ------------------------------------------------------------------------------
    def _schema(self, names: tuple[str, ...]) -> _encode.Schema:
        schema_id = self._schema_ids.get(names)
        if schema_id is None:
            schema_id = self._schema_id(names)
        return (
            self._schemas[schema_id] if schema_id >= 0 else _encode.Schema(names, self.rank_field)
        )

    def _schema_id(self, names: tuple[str, ...]) -> int:
        schema = _encode.Schema(names, self.rank_field)  # validates the names; may raise
        if len(self._schemas) >= _MAX_SCHEMAS:
            self._names.give_up()
            return -1  # names that vary per record: not worth a template each
        self._names.add(names)  # before any record with these names is buffered
        with self._lock:  # ids index a list that the drain reads
            schema_id = self._schema_ids.setdefault(names, len(self._schemas))
            if schema_id == len(self._schemas):
                self._schemas.append(schema)
        return schema_id

    def _encode_record(self, record: MetricsSample) -> _render.Entry:
        if not isinstance(record, MetricsSample):
            raise TypeError(f"log() takes a MetricsSample, got {type(record).__name__}")
        return self._encode_general(record, list(record.metrics.values()))

    def _encode_general(self, record: MetricsSample, values: list[Any]) -> _render.Entry:
        schema = self._schema(tuple(record.metrics))
        header = (record.step, record.epoch, record.timestamp)
        on_device = _encode.normalize(schema.names, values)
        if not on_device:
            schema_id = self._schema_ids.get(schema.names, -1)
            if (
                schema_id >= 0
                and tuple(map(type, header)) == (int, int, str)
                and _NUMBERS.issuperset(map(type, values))
            ):
                return (*header, *values, schema_id)  # numpy and CPU tensors, now plain numbers
            return schema.line(header, values)  # raises TypeError naming a bad metric
        parts = [_encode.opening(*header, self.rank_field)]
        holes: list[tuple[int, str]] = []
        for key, name, value, i in zip(schema.keys, schema.names, values, itertools.count()):
            if i in on_device:
                holes.append((len(parts) + 1, name))
                parts += (f",{key}:", "")
            else:
                parts.append(f",{key}:{_encode.encode_value(name, value)}")
        parts.append("}\n")
        return _render.Deferred(parts, holes, _snapshot(schema.names, on_device))


class _NameList:
    """The metric names sidecar of a metrics file (see settings.METRIC_NAMES_SUFFIX).

    One JSON value per line: ``{"rank": R}`` (this logger's rank field, null for none), then
    each metric name as a string the first time it is used; ``null`` when the names are too
    many to list. Best effort and safe: if a name cannot be recorded the sidecar is removed,
    and a reader without one reads the whole file.
    """

    def __init__(self, path: str, append: bool, rank: int | None) -> None:
        self.path = path
        self.known: set[str] = set()
        self.opening = '{"rank":%s}\n' % ("null" if rank is None else int(rank))
        self.done = False  # gave up (too many names) or failed: write nothing more
        if not append:
            self._remove()

    def add(self, names: tuple[str, ...]) -> None:
        new = [name for name in names if name not in self.known]
        if new and not self.done:
            lines = "".join(_encode._quote(name) + "\n" for name in new)
            self._append(self.opening + lines)
            self.opening = ""
            self.known.update(new)

    def give_up(self) -> None:
        if not self.done:
            self._append("null\n")
            self.done = True

    def _append(self, text: str) -> None:
        try:
            with open(self.path, "a", encoding="utf-8", errors="backslashreplace") as f:
                f.write(text)
        except OSError:
            self.done = True
            self._remove()

    def _remove(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def _snapshot(names: tuple[str, ...], on_device: dict[int, Any]) -> list[tuple[Any, list[int]]]:
    """Copies of a record's device values: one stacked copy per (device, dtype, shape).

    A copy keeps in-place updates made after log() out of the record; it is queued on the
    device, so it costs a kernel launch per group (usually one per record), never a sync.
    """
    torch = sys.modules["torch"]
    indices, tensors = list(on_device), list(on_device.values())
    if len(set(map(_dtype_of, tensors))) == 1:  # the usual record: one stack, no grouping
        try:
            block = torch.stack(tensors).detach()
        except RuntimeError:
            pass  # shapes or devices differ: group them below
        else:
            _encode.check_tensor(names[indices[0]], block)
            return [(block, list(range(len(tensors))))]
    groups: dict[tuple[Any, ...], list[int]] = {}
    for hole, tensor in enumerate(tensors):
        groups.setdefault((tensor.device, tensor.dtype, tensor.shape), []).append(hole)
    blocks = []
    for holes in groups.values():
        _encode.check_tensor(names[indices[holes[0]]], tensors[holes[0]])
        blocks.append((torch.stack([tensors[h] for h in holes]).detach(), holes))
    return blocks


class MetricLoggerDist(MetricLogger):
    """Writes on global rank 0 only; other ranks never open (or create) the file."""

    def __init__(
        self,
        filepath: str | os.PathLike[str],
        flush: bool = False,
        append: bool = True,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        *,
        rank_field: int | None = None,
    ) -> None:
        dist = _initialized_dist()
        if dist is None:  # checked before any file is touched
            raise RuntimeError("MetricLoggerDist needs an initialized torch.distributed group")
        self.rank: int = dist.get_rank()
        self.world_size: int = dist.get_world_size()
        if self.rank == 0:
            super().__init__(filepath, flush, append, buffer_size, rank_field=rank_field)
        else:
            _check_buffer_size(buffer_size)
            self.filepath = os.path.abspath(os.fspath(filepath))
            self.buffer_size = buffer_size
            self.fsync_on_write = bool(flush)
            self.rank_field = rank_field
            self.enabled = False

    @property
    def closed(self) -> bool:
        """Whether the logger was closed (always False on ranks that do not write)."""
        return self.rank == 0 and self._sink.closed

    def log(self, record: MetricsSample) -> None:
        """Buffer one record on rank 0; a no-op elsewhere."""
        if self.rank == 0:
            super().log(record)

    def flush(self) -> None:
        """Write buffered records and fsync on rank 0; a no-op elsewhere."""
        if self.rank == 0:
            super().flush()

    def close(self) -> None:
        """Close the file on rank 0; a no-op elsewhere."""
        if self.rank == 0:
            super().close()


class NullMetricLogger:
    """The logger of a rank that does not export: same interface, writes nothing."""

    enabled = False
    filepath: str | None = None

    def __init__(self) -> None:
        self.closed = False

    def log(self, record: MetricsSample) -> None:
        """Discard the record (after close(), raise like a real logger: the bug is the same)."""
        if self.closed:
            raise ValueError("log() on a closed MetricLogger (this rank does not export)")

    def flush(self) -> None:
        """Do nothing."""

    def close(self) -> None:
        """Mark the logger closed."""
        self.closed = True

    def __enter__(self) -> NullMetricLogger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _initialized_dist() -> Any:
    # torch.distributed can only be initialized if someone imported it: do not import torch here.
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist
    return None


def build_metric_logger(
    filepath: str | os.PathLike[str],
    flush: bool = False,
    append: bool = True,
    buffer_size: int = DEFAULT_BUFFER_SIZE,
) -> MetricLogger:
    """A rank-0 :class:`MetricLoggerDist` if torch.distributed is initialized, else a local one."""
    if _initialized_dist() is not None:
        return MetricLoggerDist(filepath, flush, append, buffer_size)
    return MetricLogger(filepath, flush, append, buffer_size)


def stack_and_move_tensor_metrics_to_cpu(
    metric_vector: list[MetricsSample],
) -> list[MetricsSample]:
    """New samples whose tensor metrics are Python values; the inputs are not modified.

    All tensor values of all samples are copied to the host together: one transfer per
    (device, dtype), so N samples of M tensor metrics on a GPU cost one sync, not N x M.
    Upstream rewrote the caller's samples in place; this returns copies (same timestamps).
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return [dataclasses.replace(s, metrics=dict(s.metrics)) for s in metric_vector]
    where = [
        (i, name)
        for i, sample in enumerate(metric_vector)
        for name, value in sample.metrics.items()
        if isinstance(value, torch.Tensor)
    ]
    values = _render.tensors_to_python([metric_vector[i].metrics[name] for i, name in where])
    out = [dataclasses.replace(s, metrics=dict(s.metrics)) for s in metric_vector]
    for (i, name), value in zip(where, values, strict=True):
        out[i].metrics[name] = value
    return out
