"""In the rank: torch's worker server on a unix socket, serving the Flight Recorder dump.

torch's ``_WorkerServer`` runs its handlers (``fr_trace_json``, ``dump_traceback``, ...) in a
C++ thread, so a rank blocked inside a collective still answers; stacks/recorder.py asks it.
Started by trainlaunch's torch plugin (trainlaunch/torch_plugin.py) when the node agent set
``TRAINLAUNCH_RECORDER_SOCKET``; the recording itself is torch's (``TORCH_FR_BUFFER_SIZE``).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

_SERVER: list[Any] = []  # the running server: kept alive for the life of the process


def serve(path: str) -> bool:
    """Start the worker server on path (once per process); whether it runs."""
    if _SERVER:
        return True
    import torch

    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a socket file left by an earlier process of this rank
    server = torch._C._distributed_c10d._WorkerServer(path)
    _SERVER.append(server)
    return True


__all__ = ["serve"]
