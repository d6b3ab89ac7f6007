"""Where the probe's script is: ``trainlaunch/rank/preflight.py``, read as package data.

The node agent writes it out and runs it by path in the ranks' interpreter, which may not
have trainlaunch (a stock image: the agent itself came as a zipapp, which carries this file
too); ``trainlaunch doctor`` runs it the same way with ``--facts``.
"""

from __future__ import annotations

import os
import pkgutil

PROBE_RESOURCE = "rank/preflight.py"  # inside the trainlaunch package (or the agent zipapp)


def probe_source() -> bytes:
    """The probe script's bytes (from the installed package or the agent zipapp)."""
    data = pkgutil.get_data("trainlaunch", PROBE_RESOURCE)
    if data is None:  # a loader that cannot read data: no installed trainlaunch is like that
        raise OSError(f"cannot read trainlaunch/{PROBE_RESOURCE}")
    return data


def write_probe(directory: str) -> str:
    """The probe script written (0600) into directory; its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "probe.py")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(probe_source())
    return path
