"""torchrun's command-line grammar for ``dist.ddp``: abbreviations, switches, the program.

torchrun parses with argparse: a long option may be abbreviated to any unambiguous prefix
(``--nproc-per=2``, ``--redirect=3``), ``-m``/``--module`` and ``--no-python`` are switches,
and the first positional is the script (or module): it and everything after it belong to the
program. :func:`normalize` rewrites such a command line into the resolver's canonical form
(full spellings, ``-m MODULE``/``--script PATH``, then ``--`` and the program), so
``dist.ddp`` accepts every torchrun command line. Pure; never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainlaunch.agent import flags
from trainlaunch.errors import UsageError

MODULE_SWITCHES = ("-m", "--module")
HELP = ("-h", "--help")


def _torchrun_options(prefix: str) -> list[tuple[str, str]]:
    """torchrun's long option strings starting with prefix, as (spelling, dest)."""
    return [
        (o, flag.dest)
        for flag in flags.FLAGS
        if flag.dest != "engine"  # trainlaunch's own: never preferred over another match
        for o in flag.options
        if o.startswith("--") and o.startswith(prefix)
    ]


def expand(token: str, options: Mapping[str, str]) -> str:
    """The full spelling of a long option given as an unambiguous prefix (argparse's rule).

    ``options`` maps every accepted spelling to the parameter it sets. torchrun's own flags
    come first, with argparse's rule (one option string must match): every abbreviation
    torchrun accepts means the same here, and one it finds ambiguous is refused in its words.
    Only a prefix of none of torchrun's flags is looked up among trainlaunch's own options.
    """
    name = token.partition("=")[0]
    if name in options or not name.startswith("--") or name == "--":
        return name
    theirs = _torchrun_options(name)
    if len(theirs) > 1:
        spelled = ", ".join(o for o, _ in theirs)
        raise UsageError(f"ambiguous option: {token} could match {spelled}")
    if theirs:
        spelling, dest = theirs[0]
        if spelling in options:
            return spelling
        param = "m" if dest == "module" else dest
        return next((s for s, p in options.items() if p == param and s.startswith("--")), name)
    ours = sorted(s for s in options if s.startswith(name) and s.startswith("--"))
    if len(ours) > 1:
        raise UsageError(f"ambiguous option: {token} could match {', '.join(ours)}")
    return ours[0] if ours else name  # unknown: the resolver says so, with a suggestion


def normalize(argv: Sequence[str], options: Mapping[str, str], takes_value: set[str]) -> list[str]:
    """torchrun's grammar -> the resolver's: ``[OPTIONS] [-m MODULE|--script PATH] -- PROGRAM``.

    ``options`` maps each spelling to its parameter; ``takes_value`` holds the spellings that
    consume a value. As torchrun's argparse, the first ``--`` ends the options and is dropped
    when it comes right before or right after the script; any later ``--`` is the program's.
    """
    out: list[str] = []
    module = False
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--" and module and i + 1 < len(argv):
            return out + ["-m", argv[i + 1], "--", *argv[i + 2 :]]
        if tok == "--" or tok in HELP:
            return out + list(argv[i:])
        if not tok.startswith("-") or tok == "-":  # the script (or module): the rest is its
            if module:
                return out + ["-m", tok, "--", *_after_value(argv[i + 1 :])]
            return out + ["--", tok, *_after_value(argv[i + 1 :])]
        if tok.startswith("-m") and not tok.startswith("--") and tok != "-m":
            return out + ["-m", tok[2:], "--", *_after_value(argv[i + 1 :])]  # TorchX's -mMODULE
        name, eq, value = tok.partition("=")
        if name.startswith("--"):
            name = expand(tok, options)
        if name in MODULE_SWITCHES or options.get(name) == "m":
            if eq:  # TorchX's --module=MODULE
                return out + ["-m", value, "--", *_after_value(argv[i + 1 :])]
            module = True
            i += 1
            continue
        if options.get(name) == "script":
            if eq:
                return out + ["--script", value, "--", *_after_value(argv[i + 1 :])]
            if i + 1 >= len(argv):
                return out + [name]  # the resolver reports the missing value
            return out + ["--script", argv[i + 1], "--", *_after_value(argv[i + 2 :])]
        if eq:
            out.append(f"{name}={value}")
            i += 1
        elif name in takes_value and i + 1 < len(argv):
            out += [name, argv[i + 1]]
            i += 2
        else:
            out.append(name)
            i += 1
    if module:
        raise UsageError(
            "the following arguments are required: training_script, training_script_args",
            hint="-m is a switch, as in torchrun: -m MODULE [ARGS...]",
        )
    return out


def _after_value(rest: Sequence[str]) -> list[str]:
    """The program's arguments after its script: a ``--`` right after it is dropped (argparse)."""
    return list(rest[1:] if list(rest[:1]) == ["--"] else rest)
