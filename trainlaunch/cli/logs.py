"""`trainlaunch logs HANDLE[/ROLE[/REPLICA,...]]`."""

from __future__ import annotations

import datetime as _dt
import json
import queue
import re
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


def _prefixer(pairs: list[tuple[str, int]], color: bool, raw: bool) -> dict[tuple[str, int], str]:
    if raw:
        return {p: "" for p in pairs}
    width = max(len(f"{r}/{i}") for r, i in pairs) if pairs else 0
    out = {}
    for n, (r, i) in enumerate(pairs):
        label = f"{r}/{i}".ljust(width)
        out[(r, i)] = f"\x1b[{_COLORS[n % len(_COLORS)]}m{label}\x1b[0m " if color else f"{label} "
    return out


def _lines(
    runner: Any, handle: str, pairs: list[tuple[str, int]], follow: bool, **kw: Any
) -> Iterator[tuple[tuple[str, int], str]]:
    if not follow or len(pairs) == 1:
        for p in pairs:
            for line in runner.log_lines(handle, p[0], p[1], should_tail=follow, **kw):
                yield p, line
        return
    q: queue.Queue[Any] = queue.Queue(maxsize=10000)
    done = object()

    def pump(p: tuple[str, int]) -> None:
        try:
            for line in runner.log_lines(handle, p[0], p[1], should_tail=True, **kw):
                q.put((p, line))
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            q.put(e)
        finally:
            q.put(done)

    for p in pairs:
        threading.Thread(target=pump, args=(p,), daemon=True).start()
    left = len(pairs)
    while left:
        item = q.get()
        if item is done:
            left -= 1
        elif isinstance(item, BaseException):
            raise item
        else:
            yield item


def copy_with_prefix(path: Any, prefix: bytes, out: Any, chunk_size: int = 4 << 20) -> None:
    """Copy a log file to out, prefixing every line, in large chunks (as fast as `cat`)."""
    try:
        f = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return
    at_line_start = True
    with f:
        while chunk := f.read(chunk_size):
            if prefix:
                if at_line_start:
                    out.write(prefix)
                body = memoryview(chunk.replace(b"\n", b"\n" + prefix))
                if chunk.endswith(b"\n"):
                    body = body[: -len(prefix)]  # the next line's prefix comes with it
            else:
                body = memoryview(chunk)
            at_line_start = chunk.endswith(b"\n")
            out.write(body)
    if not at_line_start:
        out.write(b"\n")


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
    color = output.stdout_is_tty() and not as_json
    prefix = _prefixer(pairs, color, raw)
    if not (follow or regex or since or until or as_json):
        files = {p: runner.log_files(handle, p[0], p[1], streams) for p in pairs}
        if all(f is not None for f in files.values()):
            sys.stdout.flush()
            for p in pairs:
                for path in files[p] or []:
                    copy_with_prefix(path, prefix[p].encode(), sys.stdout.buffer)
            return
    kw = {
        "regex": regex,
        "since": parse_time(since),
        "until": parse_time(until),
        "streams": streams,
    }
    write = sys.stdout.write
    for (role, replica), line in _lines(runner, handle, pairs, follow, **kw):
        if as_json:
            write(json.dumps({"role": role, "replica": replica, "line": line}) + "\n")
        else:
            write(prefix[(role, replica)] + line + "\n")
        if follow:
            sys.stdout.flush()


@click.command("logs")
@click.argument(
    "target", metavar="HANDLE[/ROLE[/REPLICA,...]]", shell_complete=argv.complete_app_id
)
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until the app ends.")
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

    if sweep_id_of(target):  # every app of a sweep in turn (docs/sweeps.md)
        from trainlaunch.cli import sweep_group

        sweep_group.logs(
            target,
            lambda r, h: stream_all(r, h, follow, regex, since, until, streams, as_json, raw),
        )
        return
    with get_runner() as runner:
        stream_all(runner, target, follow, regex, since, until, streams, as_json, raw)
