"""What torch loads when it is imported: trainlaunch's ``torch.backends`` entry point.

torch imports every ``torch.backends`` entry point at the end of ``import torch`` (its
device-extension autoload; ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns it off). In a rank whose
node agent asked for the Flight Recorder (``TRAINLAUNCH_RECORDER_SOCKET``), :func:`autoload`
starts torch's worker server on that socket (trainlaunch/rank/recorder.py); anywhere else it
returns at once, having imported nothing but this module and the env contract. It never
raises: a failure here would fail the user's ``import torch``.
"""

from __future__ import annotations

import os


def autoload() -> None:
    """Serve this rank's collectives on the socket the agent named, if it named one."""
    from trainlaunch.settings import RECORDER_SOCKET

    path = os.environ.get(RECORDER_SOCKET)
    if not path:
        return
    try:
        from trainlaunch.rank import recorder

        recorder.serve(path)
    except Exception:  # noqa: BLE001 - never break the user's import torch
        pass


__all__ = ["autoload"]
