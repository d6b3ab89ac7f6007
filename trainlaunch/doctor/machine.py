"""This machine's limits and trainlaunch's own needs: /dev/shm, open files and processes,
the app store, py-spy, a free rendezvous port."""

from __future__ import annotations

import os
import resource
import socket
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

from trainlaunch import store
from trainlaunch.doctor.values import Check, fail, ok, warn
from trainlaunch.errors import UsageError
from trainlaunch.preflight.sockets import port_holder
from trainlaunch.stacks.dump import pyspy_binary

GIB = 1 << 30
SHM_MIN = 1 * GIB  # DataLoader workers and NCCL's intra-node transport live in /dev/shm
STORE_FREE_MIN = 1 * GIB
NOFILE_MIN = 4096  # every rank holds sockets to every peer, plus its data loaders' files
NPROC_MIN = 4096
TORCHRUN_PORT = 29500  # torchrun's default --master-port


def _size(n: float) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / (1 << 20):.0f} MiB"


def shm(path: str = "/dev/shm") -> Check:
    """/dev/shm's size (Docker's default of 64 MiB breaks DataLoader workers and NCCL)."""
    try:
        st = os.statvfs(path)
    except OSError as e:
        return warn("/dev/shm", f"not usable: {e.strerror}", "mount a tmpfs at /dev/shm")
    total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    detail = f"{_size(total)} ({_size(free)} free)"
    if total < SHM_MIN:
        return warn(
            "/dev/shm",
            detail,
            "DataLoader workers and NCCL need more: docker run --shm-size=16g (or --ipc=host)",
        )
    return ok("/dev/shm", detail)


def _limit(name: str, which: int, minimum: int, fix: str) -> Check:
    soft, hard = resource.getrlimit(which)
    shown = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
    hard_shown = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    detail = f"{shown} (hard {hard_shown})"
    if soft != resource.RLIM_INFINITY and soft < minimum:
        return warn(name, detail, fix)
    return ok(name, detail)


def open_files() -> Check:
    """The open-file limit ranks inherit."""
    return _limit(
        "open files",
        resource.RLIMIT_NOFILE,
        NOFILE_MIN,
        f"ulimit -n {NOFILE_MIN * 16} (or limits.conf)",
    )


def processes() -> Check:
    """The process limit (every rank, DataLoader worker and thread counts)."""
    return _limit(
        "processes",
        resource.RLIMIT_NPROC,
        NPROC_MIN,
        f"ulimit -u {NPROC_MIN * 16} (or limits.conf)",
    )


def app_store(environ: Mapping[str, str]) -> Check:
    """The app store: where it is, private, writable, with room (created by the first run)."""
    try:
        root = store.store_root(environ)
    except UsageError as e:
        return fail("app store", e.message, e.hint or "")
    probe = root if root.exists() else next(p for p in root.parents if p.exists())
    if root.exists():
        st = root.stat()
        if st.st_uid != os.getuid():
            return fail(
                "app store",
                f"{root} is owned by uid {st.st_uid}",
                "set TRAINLAUNCH_HOME to a directory you own",
            )
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            return warn(
                "app store", f"{root} is mode {stat.S_IMODE(st.st_mode):o}", f"chmod 700 {root}"
            )
    if not os.access(probe, os.W_OK | os.X_OK):
        return fail(
            "app store",
            f"{probe} is not writable",
            "set TRAINLAUNCH_HOME to a directory you can write",
        )
    vfs = os.statvfs(probe)
    free = vfs.f_bavail * vfs.f_frsize
    where = str(root) if root.exists() else f"{root} (created by the first run)"
    if free < STORE_FREE_MIN:
        return warn(
            "app store",
            f"{where}: {_size(free)} free",
            "free some space: logs and snapshots go there",
        )
    return ok("app store", f"{where}, private, {_size(free)} free")


def pyspy() -> Check:
    """py-spy, which `trainlaunch stack` and the hang watchdog run."""
    binary = pyspy_binary()
    if binary is None:
        return warn(
            "py-spy", "not found", "pip install py-spy (for `trainlaunch stack` and hang dumps)"
        )
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return warn("py-spy", f"{binary} does not run: {e}", "reinstall it: pip install -U py-spy")
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    level = scope.read_text().strip() if scope.is_file() else "0"
    if level not in ("0", "1") and os.getuid() != 0:
        return warn(
            "py-spy",
            f"{out.strip() or binary}; ptrace_scope is {level}",
            "py-spy needs ptrace: sysctl kernel.yama.ptrace_scope=1 (or run as root)",
        )
    return ok("py-spy", f"{out.strip() or binary} ({binary})")


def rendezvous_port(port: int = TORCHRUN_PORT) -> Check:
    """Whether torchrun's default rendezvous port is free (trainlaunch picks free ones itself)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError as e:
            holder = port_holder(port)
            return warn(
                "rendezvous port",
                f"{port} is taken ({e.strerror}{'; ' + holder if holder else ''})",
                "plain torchrun needs --master-port; trainlaunch picks a free port itself",
            )
    return ok("rendezvous port", f"{port} free (torchrun's default); trainlaunch picks its own")
