"""`trainlaunch ui`: a read-only dashboard of the apps on a local web page (docs/ui.md)."""

from __future__ import annotations

import click

from trainlaunch.cli.backends import names, scheduler_option

DEFAULT_PORT = 8765


@click.command("ui")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help=f"Port to listen on (default {DEFAULT_PORT}, or a free one when that is taken; "
    "0: any free port). A port given here that is in use is an error.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Any other than this machine's loopback lets other machines "
    "reach the page (the token is still needed; a warning says so).",
)
@scheduler_option(
    lambda: (
        f"Backend whose apps are shown: {', '.join(names())} (repeatable; "
        "default: local and every backend the config names)."
    ),
    many=True,
)
@click.option(
    "--open", "open_browser", is_flag=True, help="Also open the page in this machine's browser."
)
def command(port: int | None, host: str, schedulers: tuple[str, ...], open_browser: bool) -> None:
    """Serve a read-only dashboard of your apps on a local web page, until Ctrl-C.

    Prints the page's URL on stdout (one line, with a random token that every request
    needs; nothing else shows it); narration goes to stderr. The page lists the apps of
    every configured backend, one app's status, ranks, live logs, metrics charts and
    stacks, and a sweep's points side by side. Needs the extra trainlaunch[ui].

    \b
    Examples:
      trainlaunch ui                         # http://127.0.0.1:8765/?token=...
      trainlaunch ui --port 0 -s slurm       # a free port, Slurm's apps
      ssh -L 8765:127.0.0.1:8765 gpu-box trainlaunch ui   # from your laptop, over SSH
    """
    from trainlaunch.cli.extras import require

    require("ui", ("starlette", "uvicorn"), "`trainlaunch ui`")
    import secrets
    import sys

    from trainlaunch import schedulers as registry
    from trainlaunch.cli.boundary import raise_on_sigterm
    from trainlaunch.cli.ui import serve
    from trainlaunch.cli.ui.server import create_app
    from trainlaunch.config import load_config
    from trainlaunch.errors import UsageError
    from trainlaunch.runner import get_runner

    backends = [registry.canonical_name(s) for s in schedulers] or (
        load_config().configured_schedulers()
    )
    try:
        sock = serve.bind(host, DEFAULT_PORT if port is None else port)
    except UsageError:
        if port is not None:  # asked for: refused as asked
            raise
        sock = serve.bind(host, 0)  # the default is taken (another `ui`): any free port
        sys.stderr.write(f"port {DEFAULT_PORT} is in use: listening on a free port\n")
    token = secrets.token_urlsafe(32)
    address = serve.url(sock, token)
    if not serve.is_loopback(host):
        sys.stderr.write(
            f"warning: listening on {host}: other machines can reach this page; the token "
            "keeps them out, but it travels unencrypted (prefer ssh -L to a 127.0.0.1 page)\n"
        )
    sys.stderr.write(f"serving the apps of {', '.join(backends)}; Ctrl-C stops\n")
    sys.stdout.write(address + "\n")
    sys.stdout.flush()
    if open_browser:
        from trainlaunch.cli.ui.browser import open_privately

        open_privately(address)
    raise_on_sigterm()  # uvicorn re-raises the signal it caught: SIGTERM ends as Ctrl-C does
    serve.run(create_app(token, backends, get_runner), sock)
    # only a signal ends the server; one whose re-raise went nowhere (SIGINT inherited as
    # ignored, `ui &` in a script) still ends it as an interrupt
    raise KeyboardInterrupt
