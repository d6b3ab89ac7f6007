"""Where the store listens: loopback when its clients can only be on this host, else every
interface (torch's server always listens on every interface)."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import socket

BACKLOG = 65535  # the kernel caps it at net.core.somaxconn, as torch's server asks (-1)
_THIS_HOST = frozenset({"", "localhost", "0.0.0.0", "::"})


def only_this_host(host: str) -> bool:
    """Whether a rank told to meet at host can only be a process on this machine."""
    name = host.strip().lower().rstrip(".")
    if name in _THIS_HOST or name.endswith(".localhost"):
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(name.strip("[]").split("%", 1)[0]).is_loopback
    return False


def _bind(family: int, host: str, port: int, v6only: bool = True) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the port may be parked
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, int(v6only))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it
        sock.bind((host, port))
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def open_listeners(port: int, loopback: bool) -> list[socket.socket]:
    """The listening sockets, all on one port: 127.0.0.1 and ::1, or every interface."""
    if not loopback:
        try:
            return [_bind(socket.AF_INET6, "::", port, v6only=False)]  # dual stack
        except OSError:
            return [_bind(socket.AF_INET, "0.0.0.0", port)]
    for _ in range(8):
        v4 = _bind(socket.AF_INET, "127.0.0.1", port)
        try:
            return [v4, _bind(socket.AF_INET6, "::1", int(v4.getsockname()[1]))]
        except OSError as e:
            if e.errno != errno.EADDRINUSE or port:
                return [v4]  # no IPv6 loopback here: IPv4 alone serves "localhost"
            v4.close()  # a free IPv4 port that is taken on ::1: pick another
    return [_bind(socket.AF_INET, "127.0.0.1", port)]
