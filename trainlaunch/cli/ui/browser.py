"""``ui --open``: the page opened in this machine's browser without putting the token on a
command line (another user could read it in the process table): the browser is given a file
only this user can read, which forwards to the page, and that file goes when the server ends."""

from __future__ import annotations

import atexit
import html
import os
import shutil
import tempfile
import webbrowser
from pathlib import Path


def open_privately(address: str) -> bool:
    """Open address through a private forwarding file; whether a browser was found."""
    folder = Path(tempfile.mkdtemp(prefix="trainlaunch-ui-"))  # 0700: this user's alone
    atexit.register(shutil.rmtree, folder, True)
    page = folder / "open.html"
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        target = html.escape(address, quote=True)
        f.write(
            '<!doctype html><meta charset="utf-8">'
            f'<meta http-equiv="refresh" content="0;url={target}">'
            f'<a href="{target}">trainlaunch ui</a>\n'
        )
    return webbrowser.open(page.as_uri())


__all__ = ["open_privately"]
