"""JSON Lines metric loggers (API of NeMo Automodel's ``metric_logger``), fixed and faster.

Each line is one strict-JSON object: ``{"step", "epoch", "timestamp"[, "rank"], <metrics>}``.

* A record is encoded (or, for values on an accelerator, checked and copied) when it is logged,
  so a bad value raises ``TypeError`` at that call, naming the metric, and nothing is buffered;
  the logger keeps working. Later changes to the caller's sample or values are not seen.
* Non-finite floats become ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (see ``_encode``).
* A metric named like a header field raises ``ValueError`` instead of overwriting it.
* Records are buffered (``buffer_size``) and written whole lines per ``os.write``; the buffer
  reaches the file on a full buffer, ``flush()``, ``close()``, interpreter exit, garbage
  collection, and SIGTERM. ``flush`` (the constructor flag) fsyncs every buffer write;
  ``flush()`` (the method) always fsyncs.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import weakref
from types import TracebackType
from typing import Any

from trainlaunch.rank import _encode, _sink

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
_MAX_SCHEMAS = 4096  # metric-name tuples remembered per logger; names that vary per step reset it


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
        if rank_field is not None and (isinstance(rank_field, bool) or not isinstance(rank_field, int)):
            raise ValueError(f"rank_field must be an integer or None, got {rank_field!r}")
        self.filepath = os.path.abspath(os.fspath(filepath))
        self.buffer_size = buffer_size
        self.fsync_on_write = bool(flush)  # not `self.flush`: that would shadow flush()
        self.rank_field = rank_field
        self._schemas: dict[tuple[str, ...], _encode.Schema] = {}
        sink = _sink.Sink(self.filepath, append=append, fsync_each_write=self.fsync_on_write)
        self._sink = sink
        self._entries = sink.entries
        self._lock = sink.lock
        self._finalizer = weakref.finalize(self, sink.close)  # also runs at interpreter exit

    @property
    def closed(self) -> bool:
        """Whether the logger was closed."""
        return self._sink.closed

    def log(self, record: MetricsSample) -> None:
        """Buffer one record; a full buffer is written out. Raises if a value cannot be encoded."""
        entry = self._encode(record)  # outside the lock: encoding touches only this record
        with self._lock:
            if self._sink.closed:
                raise ValueError(f"log() on a closed MetricLogger ({self.filepath})")
            entries = self._entries
            entries.append(entry)
            if len(entries) >= self.buffer_size:
                self._sink.drain_locked()
        if _sink._pending is not None:
            _sink.run_pending()

    def flush(self) -> None:
        """Write buffered records and fsync, whatever the ``flush`` constructor flag says."""
        try:
            self._sink.flush(fsync=True)
        finally:
            if _sink._pending is not None:
                _sink.run_pending()

    def close(self) -> None:
        """Write buffered records and close the file; closing twice is harmless."""
        try:
            self._finalizer()  # runs Sink.close once and forgets it
        finally:
            if _sink._pending is not None:
                _sink.run_pending()

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
        schema = self._schemas.get(names)
        if schema is None:
            schema = _encode.Schema(names, self.rank_field)  # validates the names
            if len(self._schemas) >= _MAX_SCHEMAS:
                self._schemas.clear()
            self._schemas[names] = schema
        return schema

    def _encode(self, record: MetricsSample) -> _sink.Entry:
        if not isinstance(record, MetricsSample):
            raise TypeError(f"log() takes a MetricsSample, got {type(record).__name__}")
        metrics = record.metrics
        values = tuple(metrics.values())
        step, epoch = record.step, record.epoch
        # Fast path: exact ints and finite floats, whose repr() is JSON; the drain formats a
        # run of such records with one % operation.
        if type(step) is int and type(epoch) is int and _finite_numbers(values):
            schema = self._schemas.get(tuple(metrics)) or self._schema(tuple(metrics))
            return schema, (step, epoch, _stamp_json(record.timestamp), *values)
        return self._encode_general(record, list(values))

    def _encode_general(self, record: MetricsSample, values: list[Any]) -> _sink.Entry:
        metrics = record.metrics
        schema = self._schema(tuple(metrics))
        torch = sys.modules.get("torch")
        np = sys.modules.get("numpy")
        on_device: dict[int, Any] = {}
        for i, value in enumerate(values):
            kind = type(value)
            if kind is float or kind is int:
                continue
            if torch is not None and isinstance(value, torch.Tensor):
                _encode.check_tensor(schema.names[i], value)
                if value.is_cpu:
                    values[i] = value.detach().tolist()  # no device sync on the CPU
                else:
                    # Copy, so in-place updates before the drain do not change what is written;
                    # the copy is queued on the device and costs no sync.
                    on_device[i] = value.detach().clone()
            elif np is not None and isinstance(value, np.generic) and value.dtype.kind in "biuf":
                values[i] = value.item()
        step, epoch = record.step, record.epoch
        if not on_device and type(step) is int and type(epoch) is int and _finite_numbers(values):
            return schema, (step, epoch, _stamp_json(record.timestamp), *values)
        parts = [_encode.header(record.step, record.epoch, record.timestamp, self.rank_field)]
        holes: list[tuple[int, str, Any]] = []
        for i, (key, name) in enumerate(zip(schema.keys, schema.names)):
            parts.append(f",{key}:")
            if i in on_device:
                holes.append((len(parts), name, on_device[i]))
                parts.append("")
            else:
                parts.append(_encode.encode_value(name, values[i]))
        parts.append("}\n")
        return _sink.Deferred(parts, holes) if holes else "".join(parts)


def _finite_numbers(values: tuple[Any, ...] | list[Any]) -> bool:
    """Whether every value is an exact int or a finite float (so its repr() is JSON)."""
    if not set(map(type, values)) <= _encode.NUMERIC:
        return False
    try:
        total = sum(values)
    except OverflowError:  # an int too large for a float: let the general path cope
        return False
    return bool(total - total == 0)  # NaN or +-Inf anywhere makes this NaN (overflow: a miss)


def _stamp_json(stamp: Any) -> str:
    return _encode._quote(stamp) if type(stamp) is str else _encode.encode_value("timestamp", stamp)


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
    closed = False
    filepath: str | None = None

    def log(self, record: MetricsSample) -> None:
        """Discard the record."""

    def flush(self) -> None:
        """Do nothing."""

    def close(self) -> None:
        """Do nothing."""

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
    values = _encode.tensors_to_python([metric_vector[i].metrics[name] for i, name in where])
    out = [dataclasses.replace(s, metrics=dict(s.metrics)) for s in metric_vector]
    for (i, name), value in zip(where, values):
        out[i].metrics[name] = value
    return out
