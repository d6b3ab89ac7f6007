"""`trainlaunch torchrun --help`: the help of the command a user runs (torchrun's options with
what they do and their choices, then trainlaunch's own), not the node agent's argparse help.

Pure: the text comes from the flag table (agent/flags.py) and click's formatter.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from trainlaunch.agent import flags

HELP = ("-h", "--help")
USAGE = "[--torchrun-exit-codes] [--merge[=fuzzy]] [TORCHRUN OPTIONS] SCRIPT [ARGS]..."
OURS = (  # trainlaunch's own, before torchrun's (cli/torchrun.py reads them)
    (
        "--torchrun-exit-codes",
        "exit 1 when the app fails, as torchrun does (default: the failing rank's own exit "
        "code, 128+N for signal N)",
    ),
    (
        "--merge[=fuzzy]",
        "prefix every rank's lines with its rank and show a line several ranks wrote once "
        "(docs/logs.md)",
    ),
)
EXAMPLE = "trainlaunch torchrun --nproc-per-node 2 train.py --lr 0.1"
EXIT_CODES = (
    ("0", "every worker succeeded"),
    ("N", "the failing rank's code, 128+N for signal N (--torchrun-exit-codes: 1)"),
    ("2", "a command line torchrun's argparse refuses (unknown option, no script)"),
    ("1", "a value torchrun rejects after parsing (--nnodes 2:20:30), no such script"),
    ("130", "interrupted (Ctrl-C, SIGTERM): the app is stopped"),
)
EPILOG = "The app's handle goes to stderr: status, logs and metrics work afterwards. docs/ddp.md."


def asks_help(argv: Sequence[str]) -> bool:
    """True when torchrun's parser would see -h/--help: before the script, not after it."""
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in HELP or (len(token) > 3 and "--help".startswith(token)):
            return True
        if token == "--" or not token.startswith("-") or token == "-":
            return False  # the script (or module): what follows is the program's
        flag = _flag(token)
        if flag is not None and flag.kind != "bool" and not _has_value(token, flag):
            i += 1  # the flag's value, whatever it looks like
        i += 1
    return False


def _flag(token: str) -> flags.Flag | None:
    """The flag a token names: an exact spelling, an unambiguous long prefix (argparse's
    rule), or a short option with its value attached (-r3)."""
    name = token.partition("=")[0]
    for flag in flags.FLAGS:
        if name in flag.options:
            return flag
    if name.startswith("--"):
        found = {f.dest: f for f in flags.FLAGS for o in f.options if o.startswith(name)}
        return next(iter(found.values())) if len(found) == 1 else None
    return next((f for f in flags.FLAGS if token[:2] in f.options), None)


def _has_value(token: str, flag: flags.Flag) -> bool:
    return "=" in token or (not token.startswith("--") and len(token) > 2)


def _term(flag: flags.Flag) -> str:
    spellings = ", ".join(o for o in flag.options if not o.startswith("--") or "_" not in o)
    if flag.kind == "bool":
        return spellings
    value = "{" + ",".join(flag.choices) + "}" if flag.choices else flag.dest.upper()
    return f"{spellings} {value}"


def _definition(flag: flags.Flag) -> str:
    default = flag.default
    unset = default is None or default is False or default in ("", ())
    shown = "" if unset else f" (default: {default})"
    return f"{flag.help}{shown}"


def render(width: int | None = None) -> str:
    """The whole help text."""
    formatter = click.HelpFormatter(width=width)
    formatter.write_usage("trainlaunch torchrun", USAGE, prefix="Usage: ")
    formatter.write_paragraph()
    formatter.write_text(
        "torchrun's exact command line (alias torchrun='trainlaunch torchrun'): runs "
        "dist.ddp on this machine in the foreground, the workers' stdout on stdout and "
        "stderr on stderr as torchrun shows them; Ctrl-C stops the app. Each option also "
        "has its underscore spelling (--nproc_per_node) and, as for torchrun, may be set "
        "by PET_<NAME> (PET_NPROC_PER_NODE=2)."
    )
    with formatter.section("trainlaunch's options (first)"):
        formatter.write_dl(list(OURS))
    with formatter.section("torchrun's options"):
        rows = [
            (_term(f), _definition(f)) for f in flags.FLAGS if f.dest not in flags.NOT_TORCHRUNS
        ]
        rows.append(("-h, --help", "show this message and exit"))
        formatter.write_dl(rows)
    with formatter.section("Example"):
        formatter.write_text(EXAMPLE)
    with formatter.section("Exit codes"):
        formatter.write_dl(list(EXIT_CODES))
    formatter.write_paragraph()
    formatter.write_text(EPILOG)
    return formatter.getvalue().rstrip("\n")


__all__ = ["EXAMPLE", "asks_help", "render"]
