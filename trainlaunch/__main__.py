"""``python -m trainlaunch`` and the ``trainlaunch`` command (pyproject's [project.scripts]).

The CLI's signal handlers come first (trainlaunch/node/interrupts.py), before click or anything
else of trainlaunch's is imported: a signal at any point of a command's life is
KeyboardInterrupt, which the error boundary (cli/boundary.py) reports as ``interrupted``, exit
130 (issue 23 #13). Only the interpreter's own start-up, before this module runs, is Python's
(docs/reliability.md).

A command line that reads as a `run` on the local backend starts that app's supervisor before
anything else (schedulers/local/launch.py: a *warm* supervisor, handed the app once the CLI has
built it): its interpreter's start overlaps the CLI's own imports. It is a prefetch, read from
argv alone: whatever the CLI then decides, a supervisor no submission took is stopped and
reaped before this process exits.
"""

import os
import sys

from trainlaunch.node import interrupts

interrupts.install()

GLOBAL_FLAGS = ("--debug",)  # the group's options that take no value (cli/__init__.py)
NOT_SUBMITTING = ("--dryrun", "--help", "-h")  # `run` options after which nothing is submitted


def local_run(argv: list[str], environ: dict[str, str] | os._Environ[str]) -> bool:
    """Whether argv (without the program) reads as `run` submitting to the local backend, as far
    as the command line and the environment tell (a config file's default scheduler is read by
    the CLI: a run it sends elsewhere only wastes the prefetch)."""
    rest = list(argv)
    while rest and rest[0] in GLOBAL_FLAGS:
        rest.pop(0)
    if not rest or rest[0] != "run":
        return False
    from trainlaunch import settings  # `run` imports it anyway, the other commands need not

    scheduler = environ.get(settings.SCHEDULER, "").strip() or "local"
    options = rest[1:]
    for i, arg in enumerate(options):
        if arg in NOT_SUBMITTING:
            return False
        if arg in ("-s", "--scheduler"):
            scheduler = options[i + 1] if i + 1 < len(options) else ""
        elif arg.startswith("--scheduler="):
            scheduler = arg.partition("=")[2]
        elif arg.startswith("-s") and len(arg) > 2 and not arg.startswith("--"):
            scheduler = arg[2:]
        elif not arg.startswith("-") and (i == 0 or options[i - 1] not in ("-s", "--scheduler")):
            break  # the component (or an option's value): what follows is not run's to read
    return scheduler == "local"


def main() -> None:
    """Console-script entry point: the CLI's boundary, with the signal handlers in place."""
    prefetch = local_run(sys.argv[1:], os.environ)
    try:
        interrupts.arm()
        if prefetch:
            from trainlaunch.schedulers.local import launch

            launch.prefetch()
        from trainlaunch.cli.boundary import main as boundary_main

        boundary_main()  # exits (SystemExit); it reports every KeyboardInterrupt inside it
    except SystemExit as e:  # the command has ended and said so: no teardown to wait for
        _finish(prefetch)
        if e.code is not None and not isinstance(e.code, int):
            raise
        from trainlaunch.node.processes import exit_at_once

        exit_at_once(e.code or 0)
    except KeyboardInterrupt:  # before the boundary was in place: nothing to clean up
        _finish(prefetch)
        try:  # noqa: SIM105 - contextlib is one more import before the handlers
            os.write(2, b"interrupted\n")
        except OSError:  # stderr died of the same Ctrl-C (`2>&1 | tee`)
            pass
        os._exit(130)
    finally:
        _finish(prefetch)


def _finish(prefetched: bool) -> None:
    """The command has ended: signals wait, and a prefetched supervisor nothing took is
    stopped and reaped (idempotent)."""
    interrupts.finish()
    launch = sys.modules.get("trainlaunch.schedulers.local.launch") if prefetched else None
    if launch is not None:
        launch.drop_prefetched()


if __name__ == "__main__":
    main()
