"""`trainlaunch logs HANDLE[/ROLE[/REPLICA,...]]`."""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import queue
import re
import select
import sys
import threading
from collections.abc import Iterator
from typing import Any

import click

from trainlaunch.cli import argv, output
from trainlaunch.errors import AppNotFound, UsageError

_COLORS = ["36", "33", "35", "32", "34", "31", "96", "93", "95", "92", "94", "91"]
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")


def parse_time(text: str | None) -> float | None:
    """`30s`, `5m`, `2h`, `1d` ago, a unix time, or an ISO date/time -> unix time."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    now = _dt.datetime.now().timestamp()
    m = _DURATION.match(text.strip())
    if m:
        return now - float(m[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m[2]]
    try:
        return _dt.datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise UsageError(
            f"invalid time {text!r}: use 30s, 5m, 2h, 1d, a unix time or an ISO date/time"
        ) from None


def targets(runner: Any, target: str) -> tuple[str, list[tuple[str, int]]]:
    """The handle and the (role, replica) pairs a logs target names."""
    from trainlaunch.handles import parse_log_target

    t = parse_log_target(target)
    handle = str(t.handle)
    if t.role is None:
        app = runner.describe(handle)
        if app is None:  # e.g. a Slurm job trainlaunch did not start: nothing says where
            raise AppNotFound(
                f"no logs for {handle}: trainlaunch has no record of how it was started",
                hint="`trainlaunch status` shows what the scheduler knows about it",
            )
        roles = [r.name for r in app.roles]
    else:
        roles = [t.role]
    pairs = []
    for role in roles:
        ids = runner.log_replicas(handle, role)
        if t.replicas is not None:
            missing = sorted(set(t.replicas) - set(ids))
            if missing:  # like a missing app or role: not found (exit 4), not a usage error
                raise AppNotFound(
                    f"role {role!r} has no replica {missing[0]}; it has {', '.join(map(str, ids))}",
                    hint=f"trainlaunch logs {handle}/{role}/{ids[0]}" if ids else None,
                )
            ids = [i for i in ids if i in t.replicas]
        pairs += [(role, i) for i in ids]
    return handle, pairs


Source = tuple[str, str, int]  # (handle, role, replica): one log to read


def _prefixer(
    sources: list[Source], labels: dict[Source, str], color: bool, raw: bool
) -> dict[Source, str]:
    if raw:
        return {s: "" for s in sources}
    width = max(len(labels[s]) for s in sources) if sources else 0
    out = {}
    for n, s in enumerate(sources):
        label = labels[s].ljust(width)
        out[s] = f"\x1b[{_COLORS[n % len(_COLORS)]}m{label}\x1b[0m " if color else f"{label} "
    return out


def _lines(
    runner: Any, sources: list[Source], follow: bool, **kw: Any
) -> Iterator[tuple[Source, str]]:
    """Each source's lines; with follow, all at once, interleaved in arrival order."""
    if not follow or len(sources) == 1:
        for s in sources:
            for line in runner.log_lines(s[0], s[1], s[2], should_tail=follow, **kw):
                yield s, line
        return
    q: queue.Queue[Any] = queue.Queue(maxsize=10000)
    done = object()

    def pump(s: Source) -> None:
        try:
            for line in runner.log_lines(s[0], s[1], s[2], should_tail=True, **kw):
                q.put((s, line))
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            q.put(e)
        finally:
            q.put(done)

    for s in sources:
        threading.Thread(target=pump, args=(s,), daemon=True).start()
    left = len(sources)
    while left:
        item = q.get()
        if item is done:
            left -= 1
        elif isinstance(item, BaseException):
            raise item
        else:
            yield item


CHUNK = 256 << 10  # with the pipe grown to PIPE_BYTES: measured fastest (bench/README.md)
PIPE_BYTES = 1 << 20  # /proc/sys/fs/pipe-max-size's default: what any user may ask for


def copy_with_prefix(path: Any, prefix: bytes, out: Any, chunk_size: int = CHUNK) -> None:
    """Copy a log file to out, prefixing every line, in chunks (no per-line Python work).

    Without a prefix the kernel copies the file (sendfile) where out is a descriptor that
    takes it. A last line without a newline gets one.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return
    try:
        out.flush()
        _grow_pipe(out)
        ended = None if prefix else _send_file(fd, out)
        if ended is None:
            ended = _copy_prefixed(fd, prefix, out, chunk_size)
        if not ended:
            out.write(b"\n")
    finally:
        os.close(fd)


def _copy_prefixed(fd: int, prefix: bytes, out: Any, chunk_size: int) -> bool:
    """Copy fd to out with prefix before every line; whether the last line was complete."""
    at_line_start, newline = True, b"\n" + prefix
    while chunk := os.read(fd, chunk_size):
        if prefix:
            if at_line_start:
                out.write(prefix)
            body = memoryview(chunk.replace(b"\n", newline))
            if chunk.endswith(b"\n"):
                body = body[: -len(prefix)]  # the next line's prefix comes with it
            out.write(body)
        else:
            out.write(chunk)
        at_line_start = chunk.endswith(b"\n")
    return at_line_start


def _grow_pipe(out: Any) -> None:
    """Into a pipe, ask for PIPE_BYTES of room: a 64 KiB pipe makes writer and reader take
    turns every 64 KiB (half the rate of `cat` on 2 cores); best effort, Linux only."""
    import fcntl
    import stat

    try:
        fd = out.fileno()
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (AttributeError, OSError, ValueError):  # not a descriptor, not Linux, over a limit
        pass


def _send_file(fd: int, out: Any) -> bool | None:
    """sendfile fd to out's descriptor: whether the file ended with a newline; None: cannot."""
    try:
        out_fd = out.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    offset = 0
    while True:
        try:
            sent = os.sendfile(out_fd, fd, offset, 1 << 30)
        except BlockingIOError:  # a non-blocking stdout (shared with a parent): wait for room
            select.select([], [out_fd], [])
            continue
        except OSError as e:
            if offset == 0 and e.errno in _NO_SENDFILE:
                return None  # e.g. macOS sends only to sockets: the read/write loop does it
            raise
        if not sent:
            break
        offset += sent
    return offset == 0 or os.pread(fd, 1, offset - 1) == b"\n"


_NO_SENDFILE = {errno.EINVAL, errno.ENOSYS, errno.ENOTSOCK, errno.EOPNOTSUPP}


def stream_all(
    runner: Any,
    target: str,
    follow: bool,
    regex: str | None = None,
    since: str | None = None,
    until: str | None = None,
    streams: str | None = None,
    as_json: bool = False,
    raw: bool = False,
) -> None:
    """Print the lines of every targeted replica (following until the app ends)."""
    handle, pairs = targets(runner, target)
    sources = [(handle, r, i) for r, i in pairs]
    color = output.stdout_is_tty() and not as_json
    prefix = _prefixer(sources, {s: f"{s[1]}/{s[2]}" for s in sources}, color, raw)
    if not (follow or regex or since or until or as_json):
        files = {s: runner.log_files(*s, streams) for s in sources}
        if all(f is not None for f in files.values()):
            sys.stdout.flush()
            for s in sources:
                for path in files[s] or []:
                    copy_with_prefix(path, prefix[s].encode(), sys.stdout.buffer)
            return
    _print(runner, sources, prefix, follow, regex, since, until, streams, as_json, {})


def follow_sweep(
    runner: Any,
    points: list[tuple[str, str]],
    regex: str | None = None,
    since: str | None = None,
    until: str | None = None,
    streams: str | None = None,
    as_json: bool = False,
    raw: bool = False,
) -> None:
    """Follow every replica of every (handle, label) point at once, each line prefixed
    ``[label] role/replica``; ends once every point has ended (queued ones included)."""
    sources: list[Source] = []
    labels: dict[Source, str] = {}
    for handle, label in points:
        for role, replica in targets(runner, handle)[1]:
            sources.append((handle, role, replica))
            labels[sources[-1]] = f"[{label}] {role}/{replica}"
    prefix = _prefixer(sources, labels, output.stdout_is_tty() and not as_json, raw)
    by_handle = dict(points)
    point = {s: by_handle[s[0]] for s in sources}
    _print(runner, sources, prefix, True, regex, since, until, streams, as_json, point)


def _print(
    runner: Any,
    sources: list[Source],
    prefix: dict[Source, str],
    follow: bool,
    regex: str | None,
    since: str | None,
    until: str | None,
    streams: str | None,
    as_json: bool,
    point: dict[Source, str],
) -> None:
    kw = {
        "regex": regex,
        "since": parse_time(since),
        "until": parse_time(until),
        "streams": streams,
    }
    write = sys.stdout.write
    for source, line in _lines(runner, sources, follow, **kw):
        if as_json:
            extra = {"handle": source[0], "point": point[source]} if point else {}
            write(json.dumps({**extra, "role": source[1], "replica": source[2], "line": line}))
            write("\n")
        else:
            write(prefix[source] + line + "\n")
        if follow:
            sys.stdout.flush()


@click.command("logs")
@click.argument(
    "target", metavar="HANDLE[/ROLE[/REPLICA,...]]", shell_complete=argv.complete_app_id
)
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Keep printing new lines until the app (every point of a sweep) ends.",
)
@click.option("--regex", default=None, help="Only lines matching this regular expression.")
@click.option("--since", default=None, help="Only lines from this time on (30s, 5m, 2h, ISO).")
@click.option("--until", default=None, help="Only lines up to this time (30s, 5m, 2h, ISO).")
@click.option(
    "--stream",
    "--streams",
    "streams",
    type=click.Choice(["stdout", "stderr", "combined"]),
    default=None,
    help="Only stdout or only stderr (default: combined, both in the order they were written).",
)
@click.option("--raw", is_flag=True, help="No role/replica prefix.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='JSON Lines on stdout: {"role", "replica", "line"} per line.',
)
def command(
    target: str,
    follow: bool,
    regex: str | None,
    since: str | None,
    until: str | None,
    streams: str | None,
    raw: bool,
    as_json: bool,
) -> None:
    """Print the logs of an app, each line prefixed with its role/replica."""
    from trainlaunch.cli.boundary import raise_on_sigterm
    from trainlaunch.runner import get_runner

    if regex:
        try:
            re.compile(regex)
        except re.error as e:
            raise UsageError(f"invalid --regex {regex!r}: {e}") from None
    if follow:
        raise_on_sigterm()
    from trainlaunch.sweep_runs import sweep_id_of

    sweep_id = sweep_id_of(target)
    if sweep_id and follow:  # every point at once, interleaved (docs/sweeps.md)
        from trainlaunch import sweep_runs, sweeps

        rows = [p for p in sweep_runs.read_sweep(sweep_id)["points"] if p.get("handle")]
        points = [
            (
                p["handle"],
                sweeps.point_label(sweeps.SweepPoint(p["index"], p["params"], p.get("seed"))),
            )
            for p in rows
        ]
        with get_runner() as runner:
            follow_sweep(runner, points, regex, since, until, streams, as_json, raw)
        return
    if sweep_id:  # every app of a sweep in turn (docs/sweeps.md)
        from trainlaunch.cli import sweep_group

        sweep_group.logs(
            target,
            lambda r, h: stream_all(r, h, follow, regex, since, until, streams, as_json, raw),
        )
        return
    with get_runner() as runner:
        stream_all(runner, target, follow, regex, since, until, streams, as_json, raw)
