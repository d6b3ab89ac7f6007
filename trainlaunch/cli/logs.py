"""`trainlaunch logs HANDLE[/ROLE[/REPLICA,...]]`."""

from __future__ import annotations

import datetime as _dt
import errno
import functools
import json
import os
import queue
import re
import select
import sys
import threading
import time
from collections.abc import Container, Iterable, Iterator, Mapping
from typing import Any

import click

from trainlaunch.cli import output, ranklogs
from trainlaunch.cli.handles import LOG_TARGET
from trainlaunch.errors import AppNotFound, UsageError
from trainlaunch.handles import Handle, LogTarget, parse_handle, parse_log_target
from trainlaunch.logmerge.merge import EXACT, FOLLOW_WINDOW_S, MODES, READ_WINDOW_LINES
from trainlaunch.logmerge.ranks import TeeFormat, tee_format
from trainlaunch.logmerge.redraw import collapse
from trainlaunch.logmerge.view import Item, ViewOptions, view
from trainlaunch.ranklist import rank_list
from trainlaunch.schedulers.api import DescribeAppResponse
from trainlaunch.sweeps.status import SweepDescription

AUTO = "auto"
MERGE_CHOICES = (AUTO, "off", *MODES)
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


def targets(
    runner: Any, target: LogTarget | str, resp: DescribeAppResponse | None = None
) -> tuple[Handle, list[tuple[str, int]], Any]:
    """The handle, the (role, replica) pairs a logs target names and the AppDef (None when
    not recorded; resp: the app's description, when the caller has it; AppNotFound for an
    unknown app)."""
    t = target if isinstance(target, LogTarget) else parse_log_target(target)
    handle = t.handle  # the value: the runner never parses it again
    app = (resp or runner.describe_app(handle)).app  # its roles say how their lines look
    if t.role is None:
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
                    f"role {role!r} has no replica {missing[0]}; its replicas: "
                    + (rank_list(ids) or "none"),
                    hint=f"trainlaunch logs {handle}/{role}/{ids[0]}" if ids else None,
                )
            ids = [i for i in ids if i in t.replicas]
        pairs += [(role, i) for i in ids]
    return handle, pairs, app


Source = tuple[Handle, str, int]  # (handle, role, replica): one log to read


def _lines(
    runner: Any, sources: list[Source], follow: bool, ticks: bool = False, **kw: Any
) -> Iterator[tuple[Source, str] | None]:
    """Each source's lines; with follow, all at once, interleaved in arrival order. ticks:
    a finished log's sources in turn, one line each (the order merging compares them in),
    and, following, None whenever nothing arrived for TICK_S (merged lines fall due)."""
    if not follow and ticks:
        yield from _round_robin(runner, sources, **kw)
        return
    if not follow or (len(sources) == 1 and not ticks):
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
        try:
            item = q.get(timeout=TICK_S if ticks else None)
        except queue.Empty:
            yield None
            continue
        if item is done:
            left -= 1
        elif isinstance(item, BaseException):
            raise item
        else:
            yield item


TICK_S = 0.05  # following merged lines: how often waiting ones are checked


def _round_robin(runner: Any, sources: list[Source], **kw: Any) -> Iterator[tuple[Source, str]]:
    """One line of each source in turn (finished logs: the replicas ran side by side)."""
    return round_robin(
        {s: runner.log_lines(s[0], s[1], s[2], should_tail=False, **kw) for s in sources}
    )


def round_robin(lines: Mapping[Any, Iterable[str]]) -> Iterator[tuple[Any, str]]:
    """(source, line): one line of each source in turn until every one is exhausted."""
    its = [(s, iter(v)) for s, v in lines.items()]
    while its:
        for pair in list(its):
            line = next(pair[1], None)
            if line is None:
                its.remove(pair)
            else:
                yield pair[0], line


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
    target: LogTarget | str,
    follow: bool,
    regex: str | None = None,
    since: str | None = None,
    until: str | None = None,
    streams: str | None = None,
    as_json: bool = False,
    raw: bool = False,
    merge: str | None = AUTO,
    ranks: Container[int] | None = None,
    out: Any = None,
    resp: DescribeAppResponse | None = None,
) -> None:
    """Print the lines of every targeted replica (following until the app ends), each with
    the one prefix of its writer; merge: exact, fuzzy, off, or auto (docs/logs.md); out:
    where (default stdout)."""
    handle, pairs, app = targets(runner, target, resp)
    sources = [(handle, r, i) for r, i in pairs]
    formats = console_formats(app, sources)
    out = out or sys.stdout
    tty = out.isatty()
    mode = merge_mode(merge, formats.values(), raw, tty and not as_json)
    labels = ranklogs.Labels(formats, tty and not as_json, raw)
    if not (follow or regex or since or until or as_json or mode or ranks is not None):
        files = {s: runner.log_files(*s, streams) for s in sources}
        if all(f is not None for f in files.values()) and ranklogs.can_copy(formats.values()):
            sys.stdout.flush()
            for s in sources:
                own, table = labels.copy_table(s, formats[s])
                for path in files[s] or []:
                    redraw = not raw and ranklogs.redrawn(path)  # a progress bar's \r
                    if raw or not (table or redraw):
                        copy_with_prefix(path, own, sys.stdout.buffer)
                    else:
                        ranklogs.relabelled_copy(path, own, table, sys.stdout.buffer, redraw)
            if not any(_size(path) for paths in files.values() for path in paths or []):
                output.narrate(f"{handle}: no output (its logs are empty)")  # not silence
            return
    options = ViewOptions(mode, ranks, FOLLOW_WINDOW_S if follow else READ_WINDOW_LINES)
    _print(
        runner, sources, formats, labels, follow, regex, since, until, streams, as_json, {}, options
    )


def _size(path: Any) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def follow_sweep(
    runner: Any,
    points: list[tuple[LogTarget | str, str]],
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
    formats: dict[Source, TeeFormat] = {}
    by_handle: dict[Handle, str] = {}
    for target, label in points:
        handle, pairs, app = targets(runner, target)
        by_handle[handle] = label
        mine = [(handle, role, replica) for role, replica in pairs]
        sources += mine
        formats.update(console_formats(app, mine))
    point = {s: by_handle[s[0]] for s in sources}
    labels = ranklogs.Labels(formats, output.stdout_is_tty() and not as_json, raw, point)
    options = ViewOptions(None, None, FOLLOW_WINDOW_S)
    _print(
        runner,
        sources,
        formats,
        labels,
        True,
        regex,
        since,
        until,
        streams,
        as_json,
        point,
        options,
    )


def merge_mode(
    merge: str | None, formats: Iterable[TeeFormat], raw: bool = False, tty: bool = False
) -> str | None:
    """exact, fuzzy or None (no merging) for a --merge value. auto merges for a person (tty)
    reading node agents that run more than one rank between them; a pipe gets every line, at
    the bulk copy's speed (docs/logs.md says why)."""
    if merge in (None, "off") or raw:
        if raw and merge not in (None, "off", AUTO):
            raise UsageError("--raw shows the lines as written: it cannot --merge them")
        return None
    if merge != AUTO:
        return merge
    ranks = sum(len(f.writers()) for f in formats if f.pattern is not None)
    return EXACT if ranks > 1 and tty else None


def console_formats(app: Any, sources: list[Source]) -> dict[Source, TeeFormat]:
    """Each replica's console format (from its role in the AppDef; plain when unrecorded)."""
    out = {}
    for s in sources:
        role = next((r for r in app.roles if r.name == s[1]), None) if app else None
        out[s] = tee_format(role, s[2], role.env) if role else TeeFormat(s[1], s[2], None, None)
    return out


def _print(
    runner: Any,
    sources: list[Source],
    formats: dict[Source, TeeFormat],
    labels: ranklogs.Labels,
    follow: bool,
    regex: str | None,
    since: str | None,
    until: str | None,
    streams: str | None,
    as_json: bool,
    point: dict[Source, str],
    options: ViewOptions,
    out: Any = None,
) -> None:
    kw = {
        "regex": regex,
        "since": parse_time(since),
        "until": parse_time(until),
        "streams": streams,
    }
    merging = options.merge is not None
    seen = [0]

    def items() -> Iterator[Item | None]:
        for item in _lines(runner, sources, follow, ticks=merging, **kw):
            if item is None:
                yield None
                continue
            seen[0] += 1
            fmt, line = formats[item[0]], item[1]
            if "\r" in line and not labels.raw:  # a redrawn line: as a terminal left it
                text = fmt.split(line)[1]
                line = line[: len(line) - len(text)] + collapse(text)
            yield item[0], fmt, line

    clock = time.monotonic if follow else (lambda: float(seen[0]))
    out = out or sys.stdout
    write = out.write
    for source, m in view(items(), list(formats.values()), options, clock):
        if as_json:
            extra = {"handle": str(source[0]), "point": point[source]} if point and source else {}  # type: ignore[index]
            write(json.dumps(ranklogs.doc(m, merging, extra)))
            write("\n")
        else:
            write(labels.line(source, m) + "\n")
        if follow:
            out.flush()
    if sources and not (follow or seen[0] or regex or since or until):
        output.narrate(f"{sources[0][0]}: no output (its logs are empty)")  # not silence


class _MergeCommand(click.Command):
    """``--merge`` alone is a switch, ``--merge=fuzzy`` names the mode (never the next
    argument: ``logs --merge HANDLE`` reads HANDLE as the handle)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Rewrite ``--merge=MODE`` to the hidden ``--merge-mode MODE``."""
        out: list[str] = []
        for i, a in enumerate(args):
            if a == "--":
                out += args[i:]
                break
            out += ["--merge-mode", a.split("=", 1)[1]] if a.startswith("--merge=") else [a]
        return super().parse_args(ctx, out)


@functools.singledispatch
def _show(desc: object, runner: Any, target: LogTarget, follow: bool, **kw: Any) -> None:
    raise TypeError(f"no logs view of {type(desc).__name__}")


@_show.register
def _(desc: DescribeAppResponse, runner: Any, target: LogTarget, follow: bool, **kw: Any) -> None:
    stream_all(runner, target, follow, resp=desc, **kw)


@_show.register
def _(desc: SweepDescription, runner: Any, target: LogTarget, follow: bool, **kw: Any) -> None:
    per_point = [  # the target's role/replicas, of each submitted point
        (LogTarget(parse_handle(p.handle), target.role, target.replicas), p)
        for p in desc.points
        if p.handle
    ]
    if follow:  # every point at once, interleaved, ending when the last has (docs/sweeps.md)
        kw = {k: v for k, v in kw.items() if k not in ("merge", "ranks")}  # one rank a point
        follow_sweep(runner, [(t, p.label) for t, p in per_point], **kw)
        return
    for t, p in per_point:  # each point in turn, under a header
        output.emit(f"==> {p.handle} ({p.label}) <==")
        stream_all(runner, t, False, resp=p.resp, **kw)


@click.command("logs", cls=_MergeCommand)
@click.argument("target", metavar="HANDLE[/ROLE[/REPLICA,...]]", type=LOG_TARGET)
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
@click.option("--raw", is_flag=True, help="The lines as written: no prefix of trainlaunch's.")
@click.option(
    "--merge",
    "merge_flag",
    flag_value=EXACT,
    default=None,
    help="A line several ranks wrote, once with its ranks (the default on a terminal); "
    "--merge=fuzzy: numbers may differ (loss 0.41..0.44); --merge=off.",
)
@click.option("--no-merge", "merge_flag", flag_value="off", help="Every line of every rank.")
@click.option("--merge-mode", default=None, hidden=True)
@click.option(
    "--ranks",
    "ranks",
    default=None,
    metavar="R,R-R",
    help="Only these ranks' lines, plus every rank's warnings, errors and tracebacks.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='JSON Lines on stdout: {"role", "replica", "rank", "local_rank", "line"} per line '
    '(merging: {"ranks", "writers", "line", "urgent"}).',
)
def command(
    target: LogTarget,
    follow: bool,
    regex: str | None,
    since: str | None,
    until: str | None,
    streams: str | None,
    raw: bool,
    merge_flag: str | None,
    merge_mode: str | None,
    ranks: str | None,
    as_json: bool,
) -> None:
    """Print the logs of an app (a sweep: of every point), each line prefixed with who wrote
    it (role/replica, rank).

    On a terminal, lines that several ranks wrote are shown once with their ranks (--merge;
    a pipe gets every line unless asked); --ranks 0 shows rank 0 and every other rank's
    warnings and errors.

    \b
    Example:
      trainlaunch logs -f local://trainlaunch/train-x7k2m9p4qa/train/0
    """
    from trainlaunch.cli.boundary import raise_on_sigterm
    from trainlaunch.runner import get_runner

    if regex:
        try:
            re.compile(regex)
        except re.error as e:
            raise UsageError(f"invalid --regex {regex!r}: {e}") from None
    wanted = parse_ranks(ranks)
    if merge_mode is not None and merge_mode not in MERGE_CHOICES:
        raise UsageError(
            f"invalid --merge={merge_mode}: use {', '.join(MERGE_CHOICES)}",
            hint="--merge (the same text), --merge=fuzzy (numbers may differ)",
        )
    merge = merge_mode or merge_flag or AUTO
    if follow:
        raise_on_sigterm()
    kw = {"regex": regex, "since": since, "until": until, "streams": streams}
    with get_runner() as runner:
        desc = runner.describe_handle(target.handle)  # an unknown handle: AppNotFound, exit 4
        _show(
            desc, runner, target, follow, as_json=as_json, raw=raw, merge=merge, ranks=wanted,
            **kw,
        )  # fmt: skip


def parse_ranks(text: str | None) -> Container[int] | None:
    """--ranks 0,2-3 -> {0, 2, 3} (None: every rank), never expanded (``0-99999999999`` costs
    nothing: issue 23 #10); a usage error naming the bad part."""
    if text is None:
        return None
    from trainlaunch.ranklist import RankRanges

    try:
        return RankRanges(text)
    except ValueError as e:
        raise UsageError(f"--ranks: {e}", hint="e.g. --ranks 0 or --ranks 0,2-3") from None
