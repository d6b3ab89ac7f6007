"""Where the page listens: the socket bound before anything is printed (so a port in use or a
bad host is one usage error, and port 0 has its number), its URL, and uvicorn serving on it."""

from __future__ import annotations

import errno
import ipaddress
import socket
from typing import Any

from trainlaunch.errors import UsageError

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach host (127.0.0.0/8, ::1, localhost)."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: a free one); UsageError if it cannot be."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise UsageError(
            f"--host {host!r}: not an address of this machine ({e})",
            hint="e.g. --host 127.0.0.1 (the default), or this machine's own address",
        ) from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise UsageError(
                f"port {port} on {host} is in use",
                hint="--port 0 picks a free port (or stop what listens there)",
            ) from None
        if e.errno in (errno.EACCES, errno.EPERM):
            raise UsageError(
                f"port {port} on {host}: permission denied", hint="ports below 1024 need root"
            ) from None
        raise UsageError(f"--host {host!r}: cannot listen there ({e.strerror})") from None
    return sock


def url(sock: socket.socket, token: str) -> str:
    """The page's address with its token (a wildcard host is reached as this machine's)."""
    host, port = sock.getsockname()[:2]
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/?token={token}"


def run(app: Any, sock: socket.socket) -> None:
    """Serve app on sock until interrupted (uvicorn re-raises the Ctrl-C it caught)."""
    import uvicorn

    config = uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        access_log=False,
        server_header=False,
        ws="none",
        timeout_graceful_shutdown=2,
    )
    uvicorn.Server(config).run(sockets=[sock])


__all__ = ["bind", "is_loopback", "run", "url"]
