"""Records per second of JSON Lines metric loggers, measured in one fresh interpreter.

usage: metrics_worker.py CONFIG_JSON; prints one JSON object {variant: {"rate", "error"}}.
CONFIG: {"records": {kind: n}, "repeats": n, "tmp": dir, "nemo": path or null}.

Variants (8 metrics per record, buffer 100, samples built before the timed loop so only the
logger is timed; each timed run ends with close(), so every record reaches the file; the
loggers of one kind take turns, repeat by repeat, so load from elsewhere hits them alike):
  <logger>/<kind> for logger in ours, nemo, raw and kind in float, np64, np32, tensor;
  <logger>/float-build: MetricsSample(...) built inside the timed loop, as training code does;
  <logger>/float-fsync: the same with the fsync-per-buffer flag (flush=True);
  <logger>/float-flush100: flush() (write + fsync) called every 100 records.
raw = json.dumps(record) + write per record, the floor for a stdlib JSON writer.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import statistics
import sys
import time
from typing import Any

NAMES = ("loss", "grad_norm", "lr", "tokens_per_s", "mem_gb", "step_time", "val_loss", "scale")


def values(kind: str, i: int) -> list[Any]:
    """Eight metric values of one record, of the given kind."""
    base = [1.0 / (i + 1), 0.5 + i % 7, 1e-4, 12345.6 + i, 31.5, 0.25, 2.0 / (i + 2), 1024.0]
    if kind.startswith("float"):
        return base
    if kind == "np64":
        import numpy as np

        return [np.float64(v) for v in base]
    if kind == "np32":
        import numpy as np

        return [np.float32(v) for v in base]
    if kind == "tensor":
        import torch

        return [torch.tensor(v) for v in base]  # 0-d float32 tensors, as losses are
    raise ValueError(kind)


def load_ours() -> Any:
    """Our MetricLogger module (trainlaunch.rank.metrics)."""
    import trainlaunch.rank.metrics as metrics

    return metrics


def load_nemo(path: str) -> Any:
    """NeMo Automodel's metric_logger.py, loaded from the unpacked wheel file."""
    spec = importlib.util.spec_from_file_location("nemo_metric_logger", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed_logger(module: Any, kind: str, n: int, path: str, fsync: bool) -> tuple[float, float]:
    """One timed run of module.MetricLogger; (wall, CPU) seconds."""
    build = kind == "float-build"  # samples made inside the timed loop, as a training loop does
    rows = [dict(zip(NAMES, values(kind, i), strict=True)) for i in range(n)]
    samples = (
        rows
        if build
        else [module.MetricsSample(step=i, epoch=0, metrics=m) for i, m in enumerate(rows)]
    )
    if os.path.exists(path):
        os.unlink(path)
    gc.collect()
    gc.freeze()  # the prebuilt samples must not make every collection in the timed loop slower
    t0, c0 = time.perf_counter(), time.process_time()
    logger = module.MetricLogger(path, flush=fsync, buffer_size=100)
    if kind == "float-flush100":
        for i, sample in enumerate(samples):
            logger.log(sample)
            if i % 100 == 99:
                logger.flush()
    elif build:
        sample_type = module.MetricsSample
        for i, metrics in enumerate(samples):
            logger.log(sample_type(step=i, epoch=0, metrics=metrics))
    else:
        for sample in samples:
            logger.log(sample)
    logger.close()
    elapsed = time.perf_counter() - t0, time.process_time() - c0
    gc.unfreeze()
    return elapsed


def timed_raw(kind: str, n: int, path: str) -> tuple[float, float]:
    """json.dumps + write per record (tensor/np32 values converted with .item())."""
    records = [dict(zip(NAMES, values(kind, i), strict=True)) for i in range(n)]
    stamp = "2026-11-29T20:29:07.207Z"
    convert = kind in ("tensor", "np32")
    gc.collect()
    gc.freeze()
    t0, c0 = time.perf_counter(), time.process_time()
    with open(path, "w", encoding="utf-8") as f:
        for i, metrics in enumerate(records):
            if convert:
                metrics = {k: v.item() for k, v in metrics.items()}
            f.write(json.dumps({"step": i, "epoch": 0, "timestamp": stamp, **metrics}) + "\n")
            if kind == "float-fsync" and i % 100 == 99:
                f.flush()
                os.fsync(f.fileno())
    elapsed = time.perf_counter() - t0, time.process_time() - c0
    gc.unfreeze()
    return elapsed


def count_lines(path: str) -> int:
    """Lines in the written file (every timed run must write every record)."""
    with open(path, "rb") as f:
        return f.read().count(b"\n")


def main() -> None:
    """Measure every variant whose logger and value kind are available."""
    cfg = json.loads(sys.argv[1])
    loggers: dict[str, Any] = {}
    errors: dict[str, str] = {}
    try:
        loggers["ours"] = load_ours()
    except ImportError as e:
        errors["ours"] = f"trainlaunch.rank.metrics not importable: {e}"
    if cfg.get("nemo"):
        try:
            loggers["nemo"] = load_nemo(cfg["nemo"])
        except Exception as e:  # noqa: BLE001 - report any load failure as a skip
            errors["nemo"] = f"cannot load {cfg['nemo']}: {e!r}"
    else:
        errors["nemo"] = "nemo logger not available"
    loggers["raw"] = None
    out: dict[str, dict[str, Any]] = {}
    kinds = list(cfg["records"])
    for kind in kinds:
        n = int(cfg["records"][kind])
        names = [
            name
            for name in ("ours", "nemo", "raw")
            if not (name == "raw" and kind == "float-flush100")
        ]
        for name in names:
            if name in errors:
                out[f"{name}/{kind}"] = {"rate": None, "error": errors[name]}
        live = [name for name in names if name not in errors]
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in live}
        for _ in range(int(cfg["repeats"])):
            for name in list(live):  # round-robin: load from elsewhere hits every logger alike
                key = f"{name}/{kind}"
                path = os.path.join(cfg["tmp"], f"{name}-{kind}.jsonl")
                try:
                    if name == "raw":
                        times[name].append(timed_raw(kind, n, path))
                    else:
                        fsync = kind == "float-fsync"
                        times[name].append(timed_logger(loggers[name], kind, n, path, fsync))
                    if count_lines(path) != n:
                        raise RuntimeError(f"wrote {count_lines(path)} lines for {n} records")
                except ImportError as e:
                    out[key] = {"rate": None, "error": f"{kind} needs {e.name}"}
                    live.remove(name)
                except Exception as e:  # noqa: BLE001 - a logger that fails on a kind is a result
                    out[key] = {"rate": None, "error": f"{type(e).__name__}: {str(e)[:80]}"}
                    live.remove(name)
        for name in live:
            walls = [wall for wall, _ in times[name]]
            cpus = [cpu for _, cpu in times[name]]
            out[f"{name}/{kind}"] = {
                "rate": n / statistics.median(walls),
                "cpu_rate": n / statistics.median(cpus),  # steadier on a shared machine
                "error": None,
            }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
