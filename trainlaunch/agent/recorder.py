"""torch's Flight Recorder in every rank of a node, for hangs (docs/hangs.md).

With ``TRAINLAUNCH_FLIGHT_RECORDER=1`` (the backends set it with ``hang_timeout``) every worker
gets ``TORCH_FR_BUFFER_SIZE`` (unless the user chose one: torch records each rank's last
collectives, gloo's on CPU included) and ``TRAINLAUNCH_RECORDER_SOCKET``: a unix socket in a
private directory on which trainlaunch's torch plugin (trainlaunch/torch_plugin.py) serves
torch's worker handlers from a thread of the rank's own, so a rank stuck in a collective
still answers. The socket's path is recorded per worker in agent.json; ``stack`` and the hang
watchdog ask it for the dump (stacks/recorder.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping

from trainlaunch import settings

FR_BUFFER_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux (104 on macOS)


class Recorders:
    """The sockets of one agent's workers, in a directory only this user may enter."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.on = environ.get(settings.FLIGHT_RECORDER, "") == "1"
        self.buffer = not any(environ.get(v) for v in FR_BUFFER_VARS)
        self.dir = ""

    def worker_env(self, attempt: int, rank: int) -> dict[str, str]:
        """What one worker needs to record and serve its collectives ({} when off)."""
        if not self.on:
            return {}
        path = self.path(attempt, rank)
        if not path:
            return {}
        env = {settings.RECORDER_SOCKET: path}
        if self.buffer:
            env["TORCH_FR_BUFFER_SIZE"] = str(settings.RECORDER_BUFFER)
        return env

    def path(self, attempt: int, rank: int) -> str:
        """The worker's socket ('' when off or no directory could be made); one per attempt:
        a restarted rank binds a fresh path (a dead one's socket file stays behind)."""
        if not self.on:
            return ""
        if not self.dir:
            try:
                self.dir = _private_dir()
            except OSError:
                self.on = False
                return ""
        return os.path.join(self.dir, f"{attempt}-{rank}.sock")

    def close(self) -> None:
        """Remove the directory (the workers have ended)."""
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = ""


def _private_dir() -> str:
    """A fresh 0700 directory short enough for socket paths (TMPDIR, else /tmp)."""
    path = tempfile.mkdtemp(prefix="trainlaunch-fr-")
    if len(path) + 16 > MAX_SOCKET_PATH:
        with contextlib.suppress(OSError):
            os.rmdir(path)
        path = tempfile.mkdtemp(prefix="trainlaunch-fr-", dir="/tmp")
    return path


__all__ = ["FR_BUFFER_VARS", "Recorders"]
