"""The one error boundary: errors become ``error: ...`` / ``hint: ...`` and an exit code."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import NoReturn

import click

from trainlaunch import settings
from trainlaunch.errors import ExitCode, TrainlaunchError
from trainlaunch.node import interrupts

COMPLETE_VAR = "_TRAINLAUNCH_COMPLETE"  # click's name for prog "trainlaunch"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C that the command has reported already ("interrupted: stopping H ..."): the
    boundary exits 130 without saying it again."""


def _own_options(argv: list[str]) -> set[str]:
    """The options trainlaunch parses (a component's own --debug or --json is not ours)."""
    try:
        from trainlaunch.cli import cli
        from trainlaunch.cli.argv import trainlaunch_options

        return trainlaunch_options(cli, argv)
    except Exception:  # noqa: BLE001 - reporting an error must not raise another
        return set(argv)


def _debug(argv: list[str]) -> bool:
    return "--debug" in _own_options(argv) or os.environ.get(settings.DEBUG, "") not in ("", "0")


def _json_error(argv: list[str], message: str, hint: str | None, code: int) -> None:
    """With --json, an error is a JSON document too (unless the command printed its own)."""
    from trainlaunch.cli import output

    if output.json_emitted() or "--json" not in _own_options(argv):
        return
    # one line, so that it also ends `logs --json`'s JSON Lines cleanly
    output.emit_json({"error": message, "hint": hint, "exit_code": code}, one_line=True)


def _usage_message(e: click.UsageError, argv: list[str]) -> tuple[str, str]:
    """A click usage error as our one line and hint (unknown options get a did-you-mean)."""
    cmd = e.ctx.command_path if e.ctx else "trainlaunch"
    if isinstance(e, click.exceptions.NoSuchOption) and e.ctx is not None:
        from trainlaunch.cli.argv import TORCHX_RUN_OPTIONS, subcommand_option, suggest

        known = [n for p in e.ctx.command.params for n in p.opts if n.startswith("-")]
        aliases = TORCHX_RUN_OPTIONS if e.ctx.command.name == "run" else None
        hint = (
            subcommand_option(e.ctx.command, argv, e.option_name)
            or suggest(e.option_name, known, aliases)
            or f"see `{cmd} --help`."
        )
        if e.ctx.command.name in ("run", "sweep"):
            hint += f" A component's own options go after its name: {cmd} COMPONENT {e.option_name}"
        return f"unknown option {e.option_name!r} of `{cmd}`", hint
    return e.format_message(), f"see `{cmd} --help`"


def _say(kind: str, text: str) -> None:
    first, *rest = str(text).strip().splitlines() or [""]
    sys.stderr.write(f"{kind}: {first}\n")
    for line in rest:
        sys.stderr.write(f"  {line}\n")


def main(argv: list[str] | None = None) -> NoReturn:
    """Console-script entry point (trainlaunch/__main__.py installs the signal handlers first).

    A signal anywhere in the command, its imports included, is KeyboardInterrupt: exit 130
    with one line. Once the command has ended, a signal during the report or the exit ends
    the process at once with 130 (_end_on_signal), never with a traceback (issue 23 #13).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    outcome: BaseException | None = None
    try:
        from trainlaunch.cli import cli, output

        output.forget_emitted()
        instruction = os.environ.get(COMPLETE_VAR)
        if instruction:  # shell completion (docs/cli.md); cli.main() would do it, make_context not
            from click.shell_completion import shell_complete

            sys.exit(shell_complete(cli, {}, "trainlaunch", COMPLETE_VAR, instruction))
        # not cli.main(): it turns a closed stdout (EPIPE) into exit 1 before we see it
        with cli.make_context("trainlaunch", list(args)) as ctx:  # click consumes its list
            cli.invoke(ctx)
        interrupts.deliver_held()
    except BaseException as e:  # noqa: BLE001 - the one place every outcome becomes an exit code
        outcome = e
    _end_on_signal()
    code = _report(outcome, args)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(code)


def _report(e: BaseException | None, args: list[str]) -> int:
    """Say what ended the command (stderr; a JSON document with --json) and return its exit code."""
    from trainlaunch.cli import output

    if e is None:
        return int(ExitCode.OK)
    if isinstance(e, SystemExit):  # shell completion
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    if isinstance(e, TrainlaunchError):
        if _debug(args):
            _traceback(e)
        _say("error", e.message)
        if e.hint:
            _say("hint", e.hint)
        _json_error(args, e.message, e.hint, int(e.exit_code))
        return int(e.exit_code)
    if isinstance(e, click.exceptions.NoArgsIsHelpError):
        click.echo(e.ctx.get_help(), err=True)
        return int(ExitCode.USAGE)
    if isinstance(e, click.UsageError):
        message, hint = _usage_message(e, args)
        _say("error", message)
        _say("hint", hint)
        _json_error(args, message, hint, ExitCode.USAGE)
        return int(ExitCode.USAGE)
    if isinstance(e, click.exceptions.Exit):
        return int(e.exit_code)
    if isinstance(e, click.ClickException):
        _say("error", e.format_message())
        _json_error(args, e.format_message(), None, ExitCode.USAGE)
        return int(ExitCode.USAGE)
    if isinstance(e, (KeyboardInterrupt, EOFError, click.exceptions.Abort)):
        if not isinstance(e, Interrupted):  # a command that stopped its app said so already
            # stderr may have died of it (`| tee`); on a terminal the ^C ends the line before
            output.narrate_or_drop(("\n" if _stderr_is_tty() else "") + "interrupted")
        _json_error(args, "interrupted", None, ExitCode.INTERRUPTED)
        return int(ExitCode.INTERRUPTED)
    if isinstance(e, BrokenPipeError):
        # the reader went away (`trainlaunch logs ... | head`): exit 0, as documented
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return int(ExitCode.OK)
    if _debug(args) or not isinstance(e, Exception):
        _traceback(e)  # --debug or a bug: never on the happy path
    _say("error", f"internal error: {type(e).__name__}: {e}")
    _say("hint", "rerun with --debug and report the traceback")
    _json_error(args, f"internal error: {type(e).__name__}: {e}", None, ExitCode.INTERNAL)
    return int(ExitCode.INTERNAL)


def _traceback(e: BaseException) -> None:
    import traceback

    traceback.print_exception(e)


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # closed or replaced
        return False


def _exit_interrupted(_signum: int, _frame: object) -> None:
    os._exit(ExitCode.INTERRUPTED)


def _end_on_signal() -> None:
    """From here a signal ends the process at once with 130: the command is over, and its
    report or the interpreter's exit must not be cut into a traceback."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if sig not in IGNORED_AT_START:
            signal.signal(sig, _exit_interrupted)


# What the CLI inherited as ignored (`nohup` ignores SIGHUP; `cmd &` in a script ignores
# SIGINT) stays ignored: a user who asked to survive a hang-up must not have the app stopped.
IGNORED_AT_START = frozenset(
    s for s in (signal.SIGINT, signal.SIGHUP) if signal.getsignal(s) == signal.SIG_IGN
)


@contextlib.contextmanager
def interrupts_held(deliver: bool = True) -> Iterator[None]:
    """SIGINT/SIGTERM/SIGHUP inside the block wait until it ends, then raise KeyboardInterrupt.

    For a step that must not be cut in half (submitting an app: afterwards the caller knows
    its handle and can stop it). With deliver=False a held signal is dropped (already
    stopping). Afterwards SIGTERM and SIGHUP raise too (see raise_on_sigterm).
    """
    held: list[int] = []
    sigint = signal.getsignal(signal.SIGINT)
    signals = [s for s in (signal.SIGTERM, signal.SIGHUP) if s not in IGNORED_AT_START]
    if sigint != signal.SIG_IGN:  # SIG_IGN (e.g. `nohup ... &`) stays ignored
        signals.append(signal.SIGINT)
    for sig in signals:
        signal.signal(sig, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        raise_on_sigterm()
        signal.signal(signal.SIGINT, signal.default_int_handler if sigint is None else sigint)
    if held and deliver:
        raise KeyboardInterrupt(signal.Signals(held[0]).name)


def raise_on_sigterm() -> None:
    """Turn SIGTERM (and SIGHUP) into KeyboardInterrupt so long waits clean up the same way."""

    signal.signal(signal.SIGTERM, interrupts.interrupt)  # (held while a module is imported)
    if signal.SIGHUP not in IGNORED_AT_START:  # `nohup trainlaunch run --wait`: hang-ups ignored
        signal.signal(signal.SIGHUP, interrupts.interrupt)
