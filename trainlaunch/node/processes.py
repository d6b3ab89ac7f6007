"""Process helpers shared by the local supervisor, the local backend and the node agent.

Torch-free and small: signalling a process group that may be gone, a rendezvous port no other
job can take, and the private umask of trainlaunch's own processes.
"""

from __future__ import annotations

import contextlib
import os


def killpg(pgid: int, sig: int) -> None:
    """Send sig to a process group; one that is gone (or not ours any more) is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def reserve_port(host: str = "127.0.0.1") -> int:
    """A free port, parked in TIME_WAIT so no plain bind (another job's) takes it for ~60 s.

    Rank 0's TCPStore binds it with SO_REUSEADDR, which TIME_WAIT allows; meanwhile the
    kernel does not hand it out for ``bind(0)``, so concurrent jobs never collide.
    """
    import socket  # here, not at the top: status, list and logs never open a socket

    with socket.socket() as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((host, 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        with socket.socket() as cli:
            cli.connect((host, port))
            conn, _ = srv.accept()
            conn.close()  # the server side closes first: it is the one left in TIME_WAIT
    return int(port)


def keep_files_private() -> int:
    """Make what this process creates private (umask 077); return the umask it had.

    For the supervisor and the node agent, whose records and logs are the user's alone; the
    processes they start get the returned umask back (``subprocess.Popen(umask=...)``).
    """
    return os.umask(0o077)


def current_umask() -> int:
    """This process's umask, unchanged (reading it means setting it: it is put back at once)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask
