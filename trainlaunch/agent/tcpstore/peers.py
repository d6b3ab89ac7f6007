"""Who owns the other end of an accepted TCP connection, when that end is on this host.

SO_PEERCRED answers only for Unix sockets, so for TCP the kernel's socket table is asked for
the peer's own socket (its local address is our remote one and vice versa): one exact
``SOCK_DIAG_BY_FAMILY`` netlink lookup per connection (O(1), ~10 us), or, where netlink
sock_diag is missing (some sandboxes), a scan of ``/proc/net/tcp`` and ``/proc/net/tcp6``.
Both list only this network namespace, so a peer that is not found is on another host.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
_HDR = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
_REQ = struct.Struct("=BBBBI")  # inet_diag_req_v2 head: family, protocol, ext, pad, states
_PORTS = struct.Struct("!HH")  # inet_diag_sockid: sport, dport (network order)
_TAIL = struct.pack("=III", 0, 0xFFFFFFFF, 0xFFFFFFFF)  # idiag_if, no cookie
_ALL_STATES = 0xFFFFFFFF
_REQ_LEN = _HDR.size + _REQ.size + _PORTS.size + 32 + len(_TAIL)
_HEAD: dict[int, bytes] = {  # everything before the socket's ports, per address family
    f: _HDR.pack(_REQ_LEN, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0)
    + _REQ.pack(f, socket.IPPROTO_TCP, 0, 0, _ALL_STATES)
    for f in (socket.AF_INET, socket.AF_INET6)
}
_PAD: dict[int, bytes] = {socket.AF_INET: b"\0" * 12, socket.AF_INET6: b""}
_UID_INODE = struct.Struct("=II")  # inet_diag_msg: idiag_uid, idiag_inode ...
_UID_AT = 4 + 48 + 12  # ... after family/state/timer/retrans, the sockid, expires/rqueue/wqueue

Address = tuple[str, int]


class Unsupported(Exception):
    """This system cannot say who owns a socket (not Linux, or no netlink nor /proc)."""


def normal(host: str) -> tuple[int, str]:
    """(family, address) of an address as accept() gives it, IPv4-mapped IPv6 unmapped.

    String tests, not ipaddress: this runs once per connection, thousands at a time.
    """
    if ":" not in host:
        return socket.AF_INET, host
    host = host.split("%", 1)[0]
    low = host.lower()
    if low.startswith("::ffff:") and "." in low:
        return socket.AF_INET, host[7:]
    return socket.AF_INET6, host


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and their IPv4-mapped forms."""
    family, addr = normal(host)
    if family == socket.AF_INET:
        return addr.startswith("127.")
    return ipaddress.ip_address(addr).is_loopback


class PeerOwners:
    """Looks up the uid that owns the local end of a connection's peer."""

    def __init__(self) -> None:
        self._nl: socket.socket | None = None
        self._netlink = hasattr(socket, "AF_NETLINK")
        self._local: dict[str, bool] = {}  # address -> is one of this host's

    def close(self) -> None:
        """Release the netlink socket."""
        if self._nl is not None:
            self._nl.close()
            self._nl = None

    def is_local(self, host: str) -> bool:
        """Whether host is an address of this machine (a bind to it succeeds)."""
        family, addr = normal(host)
        if addr not in self._local:
            try:
                with socket.socket(family, socket.SOCK_STREAM) as probe:
                    probe.bind((addr, 0))
                self._local[addr] = True
            except OSError:
                self._local[addr] = False
        return self._local[addr]

    def owner(self, peer: Address, ours: Address) -> int | None:
        """The uid owning the socket at peer that is connected to ours; None: not on this host.

        Raises Unsupported where neither netlink sock_diag nor /proc/net/tcp can answer.
        """
        pfam, paddr = normal(peer[0])
        ofam, oaddr = normal(ours[0])
        if self._netlink:
            try:
                found = self._diag(pfam, (paddr, peer[1]), (oaddr, ours[1]))
                if found is None and pfam == socket.AF_INET:  # an AF_INET6 socket, v4-mapped
                    mapped = (f"::ffff:{paddr}", peer[1]), (f"::ffff:{oaddr}", ours[1])
                    found = self._diag(socket.AF_INET6, *mapped)
                return found
            except OSError:
                self.close()
                self._netlink = False  # e.g. a sandbox without sock_diag: use /proc
        return _proc_owner((pfam, paddr, peer[1]), (ofam, oaddr, ours[1]))

    def _diag(self, family: int, src: Address, dst: Address) -> int | None:
        if self._nl is None:
            self._nl = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
        pad = _PAD[family]
        self._nl.send(
            _HEAD[family]
            + _PORTS.pack(src[1], dst[1])
            + socket.inet_pton(family, src[0])
            + pad
            + socket.inet_pton(family, dst[0])
            + pad
            + _TAIL
        )
        # the kernel answers within send(): a reply that is not there is an error, not a wait
        reply = self._nl.recv(8192, socket.MSG_DONTWAIT)
        if len(reply) < _HDR.size + 4:
            raise OSError("short sock_diag reply")
        kind = _HDR.unpack_from(reply)[1]
        if kind == NLMSG_ERROR:
            code = -struct.unpack_from("=i", reply, _HDR.size)[0]
            if code == 2:  # ENOENT: no such socket here
                return None
            raise OSError(code, "sock_diag")
        if len(reply) < _HDR.size + _UID_AT + _UID_INODE.size:
            raise OSError("short sock_diag reply")
        uid, inode = _UID_INODE.unpack_from(reply, _HDR.size + _UID_AT)
        return None if inode == 0 else int(uid)  # inode 0: a TIME_WAIT stub, not a socket


def _hex_addr(family: int, addr: str, port: int) -> str:
    """An address as /proc/net/tcp writes it: host-order 32-bit words in hex, then the port."""
    raw = socket.inet_pton(family, addr)
    words = struct.unpack(f"={len(raw) // 4}I", raw)
    return "".join(f"{w:08X}" for w in words) + f":{port:04X}"


def _proc_owner(peer: tuple[int, str, int], ours: tuple[int, str, int]) -> int | None:
    wanted = []
    for family, table in ((socket.AF_INET, "/proc/net/tcp"), (socket.AF_INET6, "/proc/net/tcp6")):
        if family == peer[0]:
            wanted.append((table, _hex_addr(*peer), _hex_addr(*ours)))
        elif peer[0] == socket.AF_INET:  # the peer may be an AF_INET6 socket, v4-mapped
            mapped = [(family, f"::ffff:{a}", p) for _, a, p in (peer, ours)]
            wanted.append((table, _hex_addr(*mapped[0]), _hex_addr(*mapped[1])))
    readable = False
    for table, local, remote in wanted:
        with contextlib.suppress(OSError), open(table, encoding="ascii") as f:
            readable = True
            next(f, None)
            for line in f:
                cols = line.split()
                if len(cols) > 9 and cols[1] == local and cols[2] == remote:
                    return None if cols[9] == "0" else int(cols[7])
    if not readable:
        raise Unsupported("no netlink sock_diag and no /proc/net/tcp")
    return None
