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

COMPLETE_VAR = "_TRAINLAUNCH_COMPLETE"  # click's name for prog "trainlaunch"


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
    """Console-script entry point."""
    from trainlaunch.cli import cli

    args = list(sys.argv[1:] if argv is None else argv)
    code: int = ExitCode.OK
    instruction = os.environ.get(COMPLETE_VAR)
    if instruction:  # shell completion (docs/cli.md); cli.main() would do it, make_context not
        from click.shell_completion import shell_complete

        sys.exit(shell_complete(cli, {}, "trainlaunch", COMPLETE_VAR, instruction))
    try:
        # not cli.main(): it turns a closed stdout (EPIPE) into exit 1 before we see it
        with cli.make_context("trainlaunch", list(args)) as ctx:  # click consumes its list
            cli.invoke(ctx)
    except TrainlaunchError as e:
        if _debug(args):
            import traceback  # --debug or a bug: never on the happy path

            traceback.print_exc()
        _say("error", e.message)
        if e.hint:
            _say("hint", e.hint)
        code = int(e.exit_code)
        _json_error(args, e.message, e.hint, code)
    except click.exceptions.NoArgsIsHelpError as e:
        click.echo(e.ctx.get_help(), err=True)
        code = ExitCode.USAGE
    except click.UsageError as e:
        message, hint = _usage_message(e, args)
        _say("error", message)
        _say("hint", hint)
        code = ExitCode.USAGE
        _json_error(args, message, hint, code)
    except click.exceptions.Abort:
        sys.stderr.write("\ninterrupted\n")
        code = ExitCode.INTERRUPTED
        _json_error(args, "interrupted", None, code)
    except click.exceptions.Exit as e:
        code = int(e.exit_code)
    except click.ClickException as e:
        _say("error", e.format_message())
        code = ExitCode.USAGE
        _json_error(args, e.format_message(), None, code)
    except (KeyboardInterrupt, EOFError):
        sys.stderr.write("\ninterrupted\n")
        code = ExitCode.INTERRUPTED
        _json_error(args, "interrupted", None, code)
    except BrokenPipeError:
        # the reader went away (`trainlaunch logs ... | head`): exit 0, as documented
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = ExitCode.OK
    except Exception as e:  # noqa: BLE001 - the single place unexpected errors are reported
        if _debug(args):
            import traceback  # --debug or a bug: never on the happy path

            traceback.print_exc()
        _say("error", f"internal error: {type(e).__name__}: {e}")
        _say("hint", "rerun with --debug and report the traceback")
        code = ExitCode.INTERNAL
        _json_error(args, f"internal error: {type(e).__name__}: {e}", None, code)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(code)


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

    def handler(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, handler)
    if signal.SIGHUP not in IGNORED_AT_START:  # `nohup trainlaunch run --wait`: hang-ups ignored
        signal.signal(signal.SIGHUP, handler)
