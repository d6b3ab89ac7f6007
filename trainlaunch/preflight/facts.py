"""What a node agent learns about its node without torch: the torch-free half of a fingerprint.

The other half (python, torch, CUDA, NCCL, the modules found) comes from the probe that runs
in the ranks' own interpreter and environment (trainlaunch.rank.preflight), because only that
interpreter can say which torch the ranks will import.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import shutil
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainlaunch import settings

ENV_PREFIXES = ("NCCL_", "TORCH_", "CUDA_")
# set per node or per rank on purpose (a GPU slice, the agent's own): never compared
PER_NODE_ENV = frozenset({"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"})
CONTEXT_ENV = ("PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONHOME")
IFNAME_ENV = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
_LIB_DIRS = ("/usr/local/lib", "/usr/lib", "/usr/lib64", "/usr/lib/x86_64-linux-gnu")
_SIOCGIFADDR = 0x8915
SMI_TIMEOUT_S = 10.0


def node_name(environ: Mapping[str, str]) -> str:
    """The node as its scheduler names it (Slurm's node name: what --exclude takes), else the host."""
    return environ.get("SLURMD_NODENAME") or socket.gethostname()


def compared_env(environ: Mapping[str, str], extra: Sequence[str] = ()) -> dict[str, str]:
    """The NCCL_*, TORCH_* and CUDA_* variables (and extra names) the nodes must agree on.

    A secret's value (settings.is_secret) is never sent nor recorded: a digest of it is, so
    that nodes holding different tokens still differ.
    """
    out = {k: v for k, v in environ.items() if k.startswith(ENV_PREFIXES) and k not in PER_NODE_ENV}
    for name in extra:
        out[name] = environ.get(name, "")  # unset and empty read the same: "" either way
    for name, value in out.items():
        if value and settings.is_secret(name, value):
            digest = hashlib.sha256(value.encode()).hexdigest()[:12]
            out[name] = f"{settings.SECRET_MASK} (sha256 {digest})"
    return dict(sorted(out.items()))


def interfaces() -> dict[str, list[str]]:
    """Network interface names and their IPv4 addresses (NCCL_SOCKET_IFNAME picks among them)."""
    out: dict[str, list[str]] = {}
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return out
    for name in names:
        out[name] = list(_ipv4(name))
    return out


def _ipv4(name: str) -> Iterator[str]:
    if not sys.platform.startswith("linux"):
        return
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s, contextlib.suppress(OSError):
        req = struct.pack("256s", name.encode()[:15])
        yield socket.inet_ntoa(fcntl.ioctl(s.fileno(), _SIOCGIFADDR, req)[20:24])


def gpus() -> tuple[list[str], str | None]:
    """(the NVIDIA GPUs' names, the driver version) from nvidia-smi; ([], None) without one."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return [], None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=SMI_TIMEOUT_S,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return [], None
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if "," in line]
    return [r[0] for r in rows], (rows[0][1] if rows else None)


def nccl_plugin(environ: Mapping[str, str]) -> str | None:
    """The NCCL network plugin library NCCL would load here (NCCL_NET_PLUGIN's rule), or None."""
    wanted = environ.get("NCCL_NET_PLUGIN", "")
    if wanted.lower() == "none":
        return None
    if "/" in wanted:
        return wanted if os.path.isfile(wanted) else None
    names = [f"libnccl-net-{wanted}.so", wanted] if wanted else ["libnccl-net.so"]
    dirs = [d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d] + list(_LIB_DIRS)
    for d in dirs:
        for name in names:
            if os.path.isfile(os.path.join(d, name)):
                return name
    return None


def ifname_matches(spec: str, names: Sequence[str]) -> bool:
    """Whether NCCL_SOCKET_IFNAME's spec (prefixes, ``=`` exact, ``^`` exclude) picks any name."""
    if not spec or spec.startswith("^"):
        return True  # an exclusion list leaves the others: NCCL's own choice
    exact = spec.startswith("=")
    items = [i.strip() for i in spec.lstrip("=").split(",") if i.strip()]
    return any(n == i if exact else n.startswith(i) for n in names for i in items)


def entry_modules(
    script: str, module: bool, cwd: str, environ: Mapping[str, str]
) -> tuple[list[str], str]:
    """(the top-level modules the entrypoint imports unconditionally, the ranks' sys.path[0]).

    Only module-level ``import``/``from`` statements count (not those inside ``try``, ``if``
    or functions: optional dependencies are the script's business). For ``-m pkg.mod`` the
    module's file is looked up on the working directory and PYTHONPATH, as python would.
    """
    if module:
        path0 = cwd
        path = _module_file(script, [cwd, *environ.get("PYTHONPATH", "").split(os.pathsep)])
    else:
        path = Path(cwd, script)
        path0 = str(path.resolve().parent)
    if path is None:
        return [], path0
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), str(path))
    except (OSError, SyntaxError, ValueError):
        return [], path0
    found: list[str] = []
    for node in tree.body:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".", 1)[0]
            if top != "__future__" and top not in found:
                found.append(top)
    return found, path0


def _module_file(name: str, paths: Sequence[str]) -> Path | None:
    parts = name.split(".")
    for base in (p for p in paths if p):
        stem = Path(base, *parts)
        for candidate in (stem.with_suffix(".py"), stem / "__main__.py", stem / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def trainlaunch_version() -> str:
    """The installed trainlaunch's version (what the agents on every node run)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trainlaunch")
    except PackageNotFoundError:
        return "?"


def node_facts(
    node_rank: int, environ: Mapping[str, str], extra_env: Sequence[str] = ()
) -> dict[str, Any]:
    """Everything about this node the agent can tell without torch (JSON-able)."""
    names, driver = gpus()
    return {
        "node_rank": node_rank,
        "node": node_name(environ),
        "hostname": socket.gethostname(),
        "env": compared_env(environ, extra_env),
        "context": {k: environ[k] for k in CONTEXT_ENV if environ.get(k)},
        "ifname": {k: environ[k] for k in IFNAME_ENV if environ.get(k)},
        "interfaces": interfaces(),
        "gpus": names,
        "driver": driver,
        "nccl_plugin": nccl_plugin(environ),
        "trainlaunch": trainlaunch_version(),
    }
