"""The preflight probe, started by the node agent once per rank (docs/preflight.md).

It runs in the ranks' own interpreter and environment (the real ranks' env, PYTHONPATH
included), before the real ranks start, as a script the agent writes out from this file:
that interpreter may have torch and not trainlaunch (a stock image on Kubernetes), so this
file needs only the standard library and torch.

1. local rank 0 reports what only this interpreter can tell: python, torch (version and where
   it was imported from), CUDA, NCCL, and whether each module the entrypoint imports is found
   (on the real ranks' sys.path), as one JSON line on the pipe ``--fd`` names;
2. every rank waits for the agent's ``go`` on stdin (end of input: the node failed the
   comparison, exit 0);
3. every rank joins a process group over node 0's store (own key prefix, so the real ranks'
   keys are untouched) and times all-reduces of a few sizes: all ranks, then each node's
   ranks among themselves; local rank 0 reports the bus bandwidths as a second JSON line.

gloo on CPU, NCCL when every local rank has its own GPU. The agent reads the lines; a
traceback goes to stderr, which the agent keeps in the replica's preflight log.
``python preflight.py --facts [--modules M,...]`` (``trainlaunch doctor``) prints the facts and
exits. Everything comes on the command line (``--fd``, ``--modules``, ...): no names to share.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import platform
import sys
import time
import traceback
from typing import Any, TextIO

GLOO_SIZES = (1 << 20, 16 << 20)  # bytes per all-reduce (CPU: loopback or the network)
NCCL_SIZES = (1 << 20, 64 << 20, 256 << 20)
ITERATIONS = {"gloo": 3, "nccl": 10}  # each timed alone after one warm-up; the fastest counts


def interpreter_facts(modules: list[str], path0: str | None) -> dict[str, Any]:
    """python, where it lives, and where each module would be imported from (None: missing)."""
    if path0:
        sys.path[0] = path0  # the real ranks' sys.path[0]: the script's directory
    found: dict[str, str | None] = {}
    # top-level names, found by every finder (editable installs too); nothing is imported
    for name in modules:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            found[name] = spec.origin or "(namespace package)"
        else:
            found[name] = "(built in)" if name in sys.builtin_module_names else None
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "modules": found,
    }


def _literals(path: str, names: tuple[str, ...]) -> dict[str, Any]:
    """The literal values assigned to names at the top of a Python file (not executed)."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return {}
    out: dict[str, Any] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id in names and value is not None:
            try:
                out[target.id] = ast.literal_eval(value)
            except ValueError:
                continue
    return out


def _nccl_wheel() -> str | None:
    """The version of the NCCL wheel torch loads (nvidia-nccl-cu12 and kin), if installed."""
    from importlib import metadata

    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("nvidia-nccl-cu"):
            return str(dist.version)
    return None


def torch_files() -> dict[str, Any]:
    """torch's version, path and CUDA as its files say (torch/version.py), without importing it.

    So the nodes compare their fingerprints while the probes import torch for the all-reduce,
    and a node with another torch is refused in about a second. A torch without version.py
    (a stub, a broken install) is asked by importing it.
    """
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError) as e:
        return {"torch": None, "torch_error": f"{type(e).__name__}: {e}"}
    if spec is None or not spec.submodule_search_locations:
        return {"torch": None, "torch_error": "ModuleNotFoundError: No module named 'torch'"}
    root = list(spec.submodule_search_locations)[0]
    found = _literals(os.path.join(root, "version.py"), ("__version__", "cuda"))
    if "__version__" not in found:  # no version.py: what __init__ says, else import it
        found = _literals(os.path.join(root, "__init__.py"), ("__version__",))
        if "__version__" not in found:
            return torch_facts()
    return {
        "torch": str(found["__version__"]),
        "torch_path": root,
        "cuda": found.get("cuda"),
        "nccl": _nccl_wheel() if found.get("cuda") else None,
    }


def torch_facts() -> dict[str, Any]:
    """torch's version and path, CUDA, NCCL and the GPUs it sees (or why it cannot be imported)."""
    start = time.perf_counter()
    try:
        import torch
    except BaseException as e:  # a broken install raises anything: report it, do not crash
        return {"torch": None, "torch_error": f"{type(e).__name__}: {e}"}
    out: dict[str, Any] = {
        "import_s": time.perf_counter() - start,
        "torch": str(getattr(torch, "__version__", "unknown")),
        "torch_path": os.path.dirname(str(getattr(torch, "__file__", "") or "")),
        "cuda": getattr(getattr(torch, "version", None), "cuda", None),
        "cuda_devices": 0,
        "nccl": None,
    }
    try:
        if torch.cuda.is_available():
            out["cuda_devices"] = torch.cuda.device_count()
        if torch.distributed.is_available() and torch.distributed.is_nccl_available():
            out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception as e:  # noqa: BLE001 (a fake or partial torch: what it has is reported)
        out["torch_error"] = f"{type(e).__name__}: {e}"
    return out


def _ints(*names: str) -> list[int]:
    return [int(os.environ[n]) for n in names]


def bus_bandwidth(timeout: float, prefix: str) -> dict[str, Any]:
    """Join the preflight process group (its keys under prefix in node 0's store) and time
    all-reduces: the world, then each node."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    rank, world, local_rank, local_world = _ints(
        "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"
    )
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    backend = "nccl" if gpus >= local_world else "gloo"
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    wait = timedelta(seconds=max(timeout, 1.0))
    start = time.perf_counter()
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=wait
    )
    prefixed = dist.PrefixStore(prefix, store)
    dist.init_process_group(backend, store=prefixed, rank=rank, world_size=world, timeout=wait)
    try:
        sizes = NCCL_SIZES if backend == "nccl" else GLOO_SIZES
        result: dict[str, Any] = {"backend": backend, "ranks": world, "local_ranks": local_world}
        result["init_s"] = time.perf_counter() - start
        result["world"] = _timed(dist, torch, None, world, sizes, device, backend)
        result["local"] = None
        if 1 < local_world < world:
            group, _ = dist.new_subgroups(group_size=local_world)
            result["local"] = _timed(dist, torch, group, local_world, sizes, device, backend)
        elif local_world > 1:  # one node: its ranks are the world
            result["local"] = result["world"]
        result["all_reduce_s"] = time.perf_counter() - start - result["init_s"]
        return result
    finally:
        dist.destroy_process_group()


def _timed(
    dist: Any, torch: Any, group: Any, n: int, sizes: tuple[int, ...], device: Any, backend: str
) -> dict[str, dict[str, float]]:
    """{size: {seconds of the fastest all-reduce, its bus bandwidth in bytes/s}}.

    Bus bandwidth as nccl-tests: size / time x 2(n-1)/n. Each all-reduce is timed on its
    own and the fastest kept: a degraded link is slow every time, a busy moment once.
    """
    out = {}
    for size in sizes:
        t = torch.ones(size // 4, dtype=torch.float32, device=device)
        dist.all_reduce(t, group=group)  # warm-up: connections and buffers
        best = float("inf")
        for _ in range(ITERATIONS[backend]):
            dist.barrier(group=group)  # start together: nobody's wait for the others counts
            _sync(torch, device)
            start = time.perf_counter()
            dist.all_reduce(t, group=group)
            _sync(torch, device)
            best = min(best, time.perf_counter() - start)
        busbw = size / best * 2 * (n - 1) / n if n > 1 else 0.0
        out[str(size)] = {"seconds": best, "busbw": busbw}
    return out


def _sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _report(out: TextIO | None, **line: Any) -> None:
    if out is not None:
        out.write(json.dumps(line) + "\n")
        out.flush()


def parse(argv: list[str]) -> argparse.Namespace:
    """What the agent (or doctor) passes: everything on the command line, no trainlaunch names."""
    p = argparse.ArgumentParser(prog="trainlaunch preflight probe")
    p.add_argument("--facts", action="store_true", help="print the facts as JSON and exit")
    p.add_argument("--fd", type=int, help="the pipe to write the JSON lines to")
    p.add_argument("--modules", default="", help="top-level modules to look up, comma-separated")
    p.add_argument("--path0", default=None, help="the real ranks' sys.path[0]")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds left for the all-reduce")
    p.add_argument("--store-prefix", default="preflight/pg/", help="the group's key prefix")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Report, wait for the go, measure, report; the exit code says whether it worked."""
    args = parse(sys.argv[1:] if argv is None else argv)
    modules = [m for m in args.modules.split(",") if m]
    if args.facts:
        print(json.dumps({**interpreter_facts(modules, None), **torch_facts()}))
        return 0
    out = os.fdopen(args.fd, "w", encoding="utf-8") if args.fd is not None else None
    facts = interpreter_facts(modules, args.path0)
    facts.update(torch_files())
    _report(out, facts=facts)
    # the nodes compare the facts meanwhile: import torch for the all-reduce now
    start = time.perf_counter()
    try:
        import torch.distributed  # noqa: F401
    except BaseException as e:  # a broken install raises anything
        error: str | None = f"{type(e).__name__}: {e}"
    else:
        error = None
    imported = time.perf_counter() - start
    if sys.stdin.readline().strip() != "go":
        os._exit(0)  # the nodes did not agree: no all-reduce (nothing to tear down)
    try:
        if error:
            raise RuntimeError(f"torch cannot be imported: {error}")
        result = bus_bandwidth(args.timeout, args.store_prefix)
    except BaseException as e:
        traceback.print_exc()
        _report(out, error=f"{type(e).__name__}: {' '.join(str(e).split())[:500]}")
        sys.stderr.flush()
        os._exit(1)
    _report(out, bandwidth={**result, "import_s": imported})
    # reported: skip the interpreter's teardown of torch (a second under load), which only
    # keeps the real ranks waiting
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
