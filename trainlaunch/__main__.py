"""``python -m trainlaunch`` and the ``trainlaunch`` command (pyproject's [project.scripts]).

The CLI's signal handlers come first (trainlaunch/node/interrupts.py), before click or anything
else of trainlaunch's is imported: a signal at any point of a command's life is
KeyboardInterrupt, which the error boundary (cli/boundary.py) reports as ``interrupted``, exit
130 (issue 23 #13). Only the interpreter's own start-up, before this module runs, is Python's
(docs/reliability.md).
"""

import os

from trainlaunch.node import interrupts

interrupts.install()


def main() -> None:
    """Console-script entry point: the CLI's boundary, with the signal handlers in place."""
    try:
        interrupts.arm()
        from trainlaunch.cli.boundary import main as boundary_main

        boundary_main()  # exits (SystemExit); it reports every KeyboardInterrupt inside it
    except SystemExit as e:  # the command has ended and said so: no teardown to wait for
        interrupts.finish()
        if e.code is not None and not isinstance(e.code, int):
            raise
        from trainlaunch.node.processes import exit_at_once

        exit_at_once(e.code or 0)
    except KeyboardInterrupt:  # before the boundary was in place: nothing to clean up
        interrupts.finish()
        try:  # noqa: SIM105 - contextlib is one more import before the handlers
            os.write(2, b"interrupted\n")
        except OSError:  # stderr died of the same Ctrl-C (`2>&1 | tee`)
            pass
        os._exit(130)
    finally:
        interrupts.finish()


if __name__ == "__main__":
    main()
