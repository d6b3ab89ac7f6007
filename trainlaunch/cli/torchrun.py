"""`trainlaunch torchrun ARGS...`: torchrun's exact command line, in the foreground.

The literal drop-in (``alias torchrun='trainlaunch torchrun'``): the arguments are parsed by
torchrun's own grammar (errors in torchrun's words), become a ``dist.ddp`` app on the default
backend (this machine's), and the command streams the node's console as torchrun shows it (workers' stdout on
stdout, stderr on stderr, ``--tee`` lines prefixed), stops the app on Ctrl-C (the ranks get
SIGINT first, as from torchrun) or SIGTERM, and
exits with the failing rank's exit code. The handle goes to stderr, so ``status``, ``logs``
and ``metrics`` work afterwards. Bad arguments exit as torchrun's do: 2 for what its argparse
refuses, 1 for anything refused after parsing (``--nnodes 2:20:30``, a script that does not
exist: torchrun's code raises, or its launch fails), one line each.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from typing import Any

import click

from trainlaunch.cli import output
from trainlaunch.errors import ExitCode, UsageError

EXIT_ONE = "--torchrun-exit-codes"  # trainlaunch's own, before torchrun's arguments
MERGE = "--merge"  # trainlaunch's own: lines several ranks wrote, once (docs/logs.md)
PUMP_DRAIN_S = 5.0  # after a stop, how long the console may take to show the app's last lines


class Rejected(UsageError):
    """A value torchrun's code rejects after parsing: a usage error, with torchrun's exit 1."""

    exit_code = ExitCode.APP_FAILED  # 1, torchrun's: its exception ends it (argparse: 2)


def ddp_arguments(args: Any) -> dict[str, Any]:
    """Parsed torchrun arguments -> ``dist.ddp`` keyword arguments (only what was given)."""
    from trainlaunch.agent import flags

    kwargs: dict[str, Any] = {}
    for dest in sorted(args.given):
        value = args.values[dest]
        if dest == "module":
            continue
        if flags.BY_DEST[dest].kind == "list":
            value = ",".join(v.replace(",", ",,") for v in value)
        kwargs[dest] = value
    kwargs.setdefault("tee", "0")  # torchrun's console: workers' lines unprefixed
    if flags.parse_nnodes(args.nnodes)[1] > 1:  # one torchrun is one node, always
        if args.rdzv_backend == "static":
            kwargs.setdefault("node_rank", args.node_rank)
        elif not args.rdzv_endpoint:
            kwargs["rdzv_endpoint"] = "localhost:29400"  # torchrun's c10d default
    kwargs["m" if args.module else "script"] = args.script
    kwargs["script_args"] = list(args.script_args)
    return kwargs


def terminals(args: Any, merge: str | None) -> dict[str, str]:
    """The terminal of each of our streams that the ranks get as theirs, as under torchrun
    ({} when none: a pipe, ``--tee``/``--redirects`` (files under torchrun too), ``--merge``,
    or a run handed to real torchrun)."""
    if merge or "tee" in args.given or "redirects" in args.given:
        return {}
    from trainlaunch.agent.plan import AGENT, choose_engine

    if choose_engine(args)[0] != AGENT:
        return {}
    found = {}
    for name, stream in (("stdout", sys.stdout), ("stderr", sys.stderr)):
        try:
            fd = stream.fileno()
            if os.isatty(fd) and os.access(path := os.ttyname(fd), os.W_OK):
                found[name] = path
        except (AttributeError, OSError, ValueError):  # no descriptor, no name
            continue
    return found


def tty_env(ttys: dict[str, str]) -> dict[str, str]:
    """settings.TTY for the node agent: this command and its terminals (agent/terminal.py)."""
    if not ttys:
        return {}
    from trainlaunch import settings
    from trainlaunch.agent.terminal import value
    from trainlaunch.node.processes import start_ticks

    ticks = start_ticks(os.getpid())
    if ticks is None:
        return {}
    return {settings.TTY: value(os.getpid(), ticks, ttys.get("stdout", ""), ttys.get("stderr", ""))}


def _pump(
    runner: Any,
    handle: str,
    role: str,
    stream: str,
    out: Any,
    merge: str | None,
    shown: re.Pattern[str] | None = None,
) -> None:
    """Copy one stream of the node's console to ours, whole lines, until the app ends
    (merge: through `logs`'s merged view of that stream; shown: the prefix of the ranks'
    lines that the agent already showed on our terminal, left out here)."""
    if merge:
        from trainlaunch.cli.logs import stream_all

        stream_all(runner, f"{handle}/{role}/0", True, streams=stream, merge=merge, out=out)
        return
    for line in runner.log_lines(handle, role, 0, should_tail=True, streams=stream):
        if shown is not None and shown.match(line):
            continue
        out.write(line + "\n")
        out.flush()


def follow(
    runner: Any,
    handle: str,
    role: str,
    merge: str | None = None,
    shown: dict[str, re.Pattern[str]] | None = None,
) -> Any:
    """Stream stdout and stderr live; return the final status (Ctrl-C stops the app).

    shown: per stream, the prefix of the rank lines the agent showed on our terminal itself.
    """
    from trainlaunch.cli.boundary import Interrupted, interrupts_held, raise_on_sigterm
    from trainlaunch.cli.waiting import wait_for
    from trainlaunch.node.interrupts import by_ctrl_c

    raise_on_sigterm()
    pumps = [
        threading.Thread(
            target=_pump,
            args=(runner, handle, role, name, out, merge, (shown or {}).get(name)),
            daemon=True,
            name=name,
        )
        for name, out in (("stdout", sys.stdout), ("stderr", sys.stderr))
    ]
    try:
        for t in pumps:
            t.start()
        resp = wait_for(runner, handle, None, live=False)
        for t in pumps:
            t.join()
    except KeyboardInterrupt as e:
        with interrupts_held(deliver=False):  # a second Ctrl-C must not cut the stop short
            # stderr may be gone with the Ctrl-C (`2>&1 | tee`): no write may skip the stop
            output.narrate_or_drop(f"interrupted: stopping {handle} ...")
            # Ctrl-C reaches the ranks as SIGINT, as torchrun's does (SIGTERM/SIGHUP: SIGTERM)
            runner.cancel(handle, interrupt=by_ctrl_c(e))
            for t in pumps:  # the app has ended: its last lines (the ranks' KeyboardInterrupt
                if t.ident is not None:  # handlers') are shown, as torchrun shows them
                    t.join(PUMP_DRAIN_S)
            output.narrate_or_drop(f"{handle} stopped")
        raise Interrupted from None
    return resp


@click.command(
    "torchrun",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    add_help_option=False,
)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def command(argv: tuple[str, ...]) -> None:
    """torchrun's exact command line: run dist.ddp locally in the foreground.

    trainlaunch torchrun [--torchrun-exit-codes] [--merge[=fuzzy]] [TORCHRUN OPTIONS] SCRIPT [ARGS...]
    """
    from trainlaunch.agent import flags
    from trainlaunch.errors import AppFailed
    from trainlaunch.runner import get_runner
    from trainlaunch.schedulers import DEFAULT_SCHEDULER
    from trainlaunch.specs import AppState

    rest = list(argv)
    exit_one, merge = False, None
    while rest[:1] == [EXIT_ONE] or rest[:1] and rest[0].split("=", 1)[0] == MERGE:
        if rest[0] == EXIT_ONE:
            exit_one = True
        else:
            merge = rest[0].partition("=")[2] or "exact"
            if merge not in ("exact", "fuzzy"):
                raise UsageError(f"invalid {rest[0]}: use --merge or --merge=fuzzy")
        rest = rest[1:]
    from trainlaunch.cli import torchrun_help

    if torchrun_help.asks_help(rest):  # the command a user runs, not the node agent's parser
        output.emit(torchrun_help.render())
        return
    try:
        args = flags.parse(rest, os.environ, prog="torchrun")
    except flags.ValueRejected as e:  # argparse's own errors (UsageError) stay exit 2
        raise Rejected(e.message, e.hint) from None
    with get_runner() as runner:
        try:
            # the default backend runs apps on this machine, in the foreground here
            kwargs = ddp_arguments(args)
            if merge and "tee" not in args.given:  # the ranks' prefixes tell who wrote what
                kwargs["tee"] = "3"
            if merge:  # imported before the app exists: Ctrl-C never lands inside an import
                import trainlaunch.cli.logs  # noqa: F401
            ttys = terminals(args, merge)
            env = tty_env(ttys)
            if env:  # the ranks get a terminal each, shown on ours live (agent/terminal.py)
                kwargs["env"] = env
            handle = runner.run_component("dist.ddp", kwargs, DEFAULT_SCHEDULER)
        except UsageError as e:  # e.g. no such script: torchrun's launch fails, exit 1
            raise Rejected(e.message, e.hint) from None
        output.narrate(f"trainlaunch: {handle}")
        app = runner.describe(handle)
        role = app.roles[0].name if app is not None else "default"
        shown = None
        if env:  # the ranks' lines come to our terminal from the agent; their record is
            from trainlaunch.logmerge.ranks import TEMPLATE_ENV, prefix_pattern

            pattern = prefix_pattern(os.environ.get(TEMPLATE_ENV), args.role)
            shown = dict.fromkeys(ttys, pattern)  # prefixed: left out here
        resp = follow(runner, handle, role, merge, shown)
    st = resp.status
    if st.state == AppState.SUCCEEDED:
        return
    code = 1 if exit_one or not st.exit_code else st.exit_code
    raise AppFailed(
        f"{handle} {st.state.name} (exit {st.exit_code})",
        exit_code=code,
        hint=f"trainlaunch status {handle}; trainlaunch logs {handle}",
    )
