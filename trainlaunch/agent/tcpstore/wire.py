"""The c10d TCPStore wire protocol (torch 2.13's ``TCPStoreLibUvBackend.cpp``) and its limits.

Little endian. Every request is one query byte, then its arguments: a key or value is ``u64
length + bytes``, a list is ``u64 count + items``. A client first sends VALIDATE (the magic
number, no reply), then PING (a u32 nonce, echoed back).

The limits are torch's own (keys 8 KiB, values 8 MiB, 128 Ki keys per request), so whatever
torch's server accepts this one does; on top, what torch leaves unbounded is bounded here: one
request (64 MiB), one reply (256 MiB), everything the store holds (1 GiB), and what may wait
unread in input buffers (256 MiB). A request past a limit closes its connection only.
"""

from __future__ import annotations

import re
import struct

from trainlaunch.values import frozen

MAGIC = 0x3C85F7CE  # c10d::detail::validationMagicNumber
(
    VALIDATE,
    SET,
    COMPARE_SET,
    GET,
    ADD,
    CHECK,
    WAIT,
    GETNUMKEYS,
    DELETE_KEY,
    APPEND,
    MULTI_GET,
    MULTI_SET,
    CANCEL_WAIT,
    PING,
    QUEUE_PUSH,
    QUEUE_POP,
    QUEUE_LEN,
    LIST_KEYS,
    BARRIER,
) = range(19)
QUERIES = 19
READY, NOT_READY = b"\x00", b"\x01"  # CheckResponseType
STOP_WAITING, WAIT_CANCELED = b"\x00", b"\x01"  # WaitResponseType

MAX_KEY = 8 * 1024  # torch: MAX_STRING_LEN
MAX_VALUE = 8 * 1024 * 1024  # torch: MAX_PAYLOAD_LEN
MAX_COUNT = 128 * 1024  # torch: MAX_KEY_COUNT
KEY_OVERHEAD = 64  # what a key costs beyond its bytes, counted against Limits.held
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1

U32, U64, I64 = struct.Struct("<I"), struct.Struct("<Q"), struct.Struct("<q")
_STOLL = re.compile(rb"[ \t\n\v\f\r]*([+-]?)0*([0-9]+)")


@frozen
class Limits:
    """What torch leaves unbounded, in bytes (a test may pass smaller ones)."""

    request: int = 64 * 1024 * 1024  # one request, whole
    reply: int = 256 * 1024 * 1024  # one reply, or the unsent replies of one connection
    held: int = 1024 * 1024 * 1024  # keys + values + queued items, all clients together
    buffered: int = 256 * 1024 * 1024  # partial requests in input buffers, all together


class Incomplete(Exception):
    """The request is not all here yet: args[0] is the offset it needs to reach."""


class Bad(Exception):
    """The client broke the protocol or a limit: its connection is closed, nothing else."""


def item(value: bytes) -> bytes:
    """A key or value on the wire."""
    return U64.pack(len(value)) + value


def read_u64(buf: bytes, at: int) -> int:
    """A u64 at offset at."""
    if at + 8 > len(buf):
        raise Incomplete(at + 8)
    return int(U64.unpack_from(buf, at)[0])


def read_item(buf: bytes, at: int, limit: int) -> tuple[bytes, int]:
    """(the key or value at offset at, the offset after it); longer than limit is Bad."""
    n = read_u64(buf, at)
    if n > limit:
        raise Bad(f"a {n}-byte item (at most {limit})")
    end = at + 8 + n
    if end > len(buf):
        raise Incomplete(end)
    return buf[at + 8 : end], end


def read_count(buf: bytes, at: int) -> int:
    """A list's u64 count, at most MAX_COUNT."""
    n = read_u64(buf, at)
    if n > MAX_COUNT:
        raise Bad(f"{n} keys in one request (at most {MAX_COUNT})")
    return n


def read_keys(buf: bytes, at: int) -> tuple[list[bytes], int]:
    """A list of keys."""
    keys = []
    at += 8
    for _ in range(read_count(buf, at - 8)):
        key, at = read_item(buf, at, MAX_KEY)
        keys.append(key)
    return keys, at


def read_i64(buf: bytes, at: int) -> int:
    """An i64 at offset at."""
    if at + 8 > len(buf):
        raise Incomplete(at + 8)
    return int(I64.unpack_from(buf, at)[0])


def counter(value: bytes | None) -> int:
    """A counter's value as ``std::stoll`` reads it (torch's ADD); not a number is Bad."""
    if value is None:
        return 0
    m = _STOLL.match(value)
    if m is None or len(m.group(2)) > 19:
        raise Bad("ADD to a value that is not a 64-bit number")
    n = int(m.group(2))
    n = -n if m.group(1) == b"-" else n
    if not I64_MIN <= n <= I64_MAX:
        raise Bad("ADD to a value that is not a 64-bit number")
    return n


def added(current: int, delta: int) -> int:
    """current + delta, or Bad where torch's int64 would overflow."""
    total = current + delta
    if not I64_MIN <= total <= I64_MAX:
        raise Bad(f"ADD {delta} to {current} overflows int64")
    return total
