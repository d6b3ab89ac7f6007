"""One c10d store server for bench/c10d_scale.py: ``python store_server.py ours|libuv|ours-torch``.

``ours`` is the node agent's torch-free store (trainlaunch/agent/tcpstore.py) on a selector
loop of its own, as node 0's agent runs it; ``libuv`` is torch's ``TCPStore(is_master=True,
use_libuv=True)``, what torchrun's agent hosts; ``hosted`` is the agent's ``host_store`` (torch's
server when torch imports). Prints the port, serves until stdin closes, then prints the
server's CPU seconds (user + sys).
"""

from __future__ import annotations

import os
import resource
import selectors
import sys
from datetime import timedelta


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread: libuv serves in its own
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    """Serve until stdin closes."""
    kind = sys.argv[1]
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20, 1 << 20))  # root may raise both
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ, "stdin")
    keep = None
    if kind == "libuv":
        import torch.distributed as dist

        keep = dist.TCPStore(
            "127.0.0.1", 0, None, True, timedelta(seconds=600), wait_for_workers=False
        )
        assert keep.libuvBackend
        port = keep.port
    else:
        from trainlaunch.agent.tcpstore import TCPStoreServer

        keep = TCPStoreServer(sel, 0, loopback=True)
        port = keep.port
    ready = _cpu()
    print(port, flush=True)
    while True:
        for key, events in sel.select():
            if key.data != "stdin":
                key.data.on_ready(key, events)
            elif not os.read(0, 4096):
                print(f"{_cpu() - ready:.3f}", flush=True)
                return 0


if __name__ == "__main__":
    sys.exit(main())
