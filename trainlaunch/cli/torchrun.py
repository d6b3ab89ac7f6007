"""`trainlaunch torchrun ARGS...`: torchrun's exact command line, in the foreground.

The literal drop-in (``alias torchrun='trainlaunch torchrun'``): the arguments are parsed by
torchrun's own grammar (errors in torchrun's words), become a ``dist.ddp`` app on the local
backend, and the command streams the node's console as torchrun shows it (workers' stdout on
stdout, stderr on stderr, ``--tee`` lines prefixed), stops the app on Ctrl-C or SIGTERM, and
exits with the failing rank's exit code. The handle goes to stderr, so ``status``, ``logs``
and ``metrics`` work afterwards. Bad arguments exit as torchrun's do: 2 for what its argparse
refuses, 1 for anything refused after parsing (``--nnodes 2:20:30``, a script that does not
exist: torchrun's code raises, or its launch fails), one line each.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import click

from trainlaunch.cli import output
from trainlaunch.errors import ExitCode, UsageError

EXIT_ONE = "--torchrun-exit-codes"  # trainlaunch's own, before torchrun's arguments


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


def _pump(runner: Any, handle: str, role: str, stream: str, out: Any) -> None:
    """Copy one stream of the node's console to ours, whole lines, until the app ends."""
    for line in runner.log_lines(handle, role, 0, should_tail=True, streams=stream):
        out.write(line + "\n")
        out.flush()


def follow(runner: Any, handle: str, role: str) -> Any:
    """Stream stdout and stderr live; return the final status (Ctrl-C stops the app)."""
    from trainlaunch.cli.boundary import raise_on_sigterm
    from trainlaunch.cli.waiting import wait_for

    raise_on_sigterm()
    pumps = [
        threading.Thread(
            target=_pump, args=(runner, handle, role, name, out), daemon=True, name=name
        )
        for name, out in (("stdout", sys.stdout), ("stderr", sys.stderr))
    ]
    try:
        for t in pumps:
            t.start()
        resp = wait_for(runner, handle, None, live=False)
        for t in pumps:
            t.join()
    except KeyboardInterrupt:
        output.narrate(f"interrupted: stopping {handle} ...")
        runner.cancel(handle)
        output.narrate(f"{handle} stopped")
        raise
    return resp


@click.command(
    "torchrun",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    add_help_option=False,
)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def command(argv: tuple[str, ...]) -> None:
    """torchrun's exact command line: run dist.ddp locally in the foreground.

    trainlaunch torchrun [--torchrun-exit-codes] [TORCHRUN OPTIONS] SCRIPT [ARGS...]
    """
    from trainlaunch.agent import flags
    from trainlaunch.errors import AppFailed
    from trainlaunch.runner import get_runner
    from trainlaunch.specs import AppState

    rest = list(argv)
    exit_one = False
    while rest[:1] == [EXIT_ONE]:
        exit_one, rest = True, rest[1:]
    try:
        args = flags.parse(rest, os.environ, prog="torchrun")
    except flags.ValueRejected as e:  # argparse's own errors (UsageError) stay exit 2
        raise Rejected(e.message, e.hint) from None
    with get_runner() as runner:
        try:
            handle = runner.run_component("dist.ddp", ddp_arguments(args), "local")
        except UsageError as e:  # e.g. no such script: torchrun's launch fails, exit 1
            raise Rejected(e.message, e.hint) from None
        output.narrate(f"trainlaunch: {handle}")
        app = runner.describe(handle)
        role = app.roles[0].name if app is not None else "default"
        resp = follow(runner, handle, role)
    st = resp.status
    if st.state == AppState.SUCCEEDED:
        return
    code = 1 if exit_one or not st.exit_code else st.exit_code
    raise AppFailed(
        f"{handle} {st.state.name} (exit {st.exit_code})",
        exit_code=code,
        hint=f"trainlaunch status {handle}; trainlaunch logs {handle}",
    )
