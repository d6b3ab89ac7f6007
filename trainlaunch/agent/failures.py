"""Root cause of a failed node: which rank failed first, how, and its traceback.

The traceback comes from the worker's reply file when the script used ``@record``, else
from that rank's whole stderr (its file, which the agent always writes: a deep stack's
traceback starts far above the last lines), so a user never sees "error_file: <N/A>". The
result is written torchelastic-shaped to the agent's own ``TORCHELASTIC_ERROR_FILE``, which
TorchX-style backends read back, with the host, the peers stopped because of it and why it
failed (trainlaunch/diagnosis).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Sequence
from typing import Any

from trainlaunch.diagnosis.traceback import last_traceback
from trainlaunch.diagnosis.values import Diagnosis
from trainlaunch.node.exits import shell_code, signal_name
from trainlaunch.ranklist import rank_list
from trainlaunch.values import frozen

STDERR_SCAN_BYTES = 8 << 20  # how much of a rank's stderr (its end) is searched for the traceback


@frozen
class Failure:
    """One worker that exited non-zero (before the agent stopped the others)."""

    rank: int
    local_rank: int
    node_rank: int
    pid: int
    exit_code: int  # Popen's convention: -N when killed by signal N
    observed: float  # when the agent reaped it (unix time)
    order: int  # reaping order: breaks ties between equal second-resolution timestamps
    attempt: int
    error_file: str
    stderr_file: str
    stderr_tail: str
    peak_rss: int | None = None  # bytes: the most memory it used (wait4)

    @property
    def signal(self) -> str | None:
        """Signal name when killed by a signal (SIGKILL, SIGSEGV, ...)."""
        return signal_name(self.exit_code, returncode=True)

    @property
    def shell_code(self) -> int:
        """The exit code a shell reports: the code, or 128+N for signal N."""
        return shell_code(self.exit_code)

    def reply(self) -> dict[str, Any] | None:
        """The worker's own error file (written by @record), if valid."""
        if not self.error_file:
            return None
        try:
            with open(self.error_file, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and "message" in data else None

    def timestamp(self) -> int:
        """torchelastic's failure time: the reply file's, else when the exit was seen."""
        msg = (self.reply() or {}).get("message")
        if isinstance(msg, dict):
            try:
                return int(msg["extraInfo"]["timestamp"])
            except (KeyError, TypeError, ValueError):
                pass
        return int(self.observed)

    def how(self) -> str:
        """'exited with code 3' or 'killed by SIGKILL'."""
        return f"killed by {self.signal}" if self.signal else f"exited with code {self.exit_code}"

    def stderr(self) -> str:
        """The end of its stderr (STDERR_SCAN_BYTES of its file; the kept tail without one)."""
        if self.stderr_file:
            try:
                with open(self.stderr_file, "rb") as f:
                    f.seek(0, 2)
                    f.seek(max(0, f.tell() - STDERR_SCAN_BYTES))
                    return f.read().decode("utf-8", "replace")
            except OSError:
                pass
        return self.stderr_tail


def root_cause(failures: Sequence[Failure]) -> Failure:
    """The first failure: smallest timestamp (torchelastic's rule), then reaping order."""
    return min(failures, key=lambda f: (f.timestamp(), f.order))


def _headline(f: Failure) -> tuple[str, str]:
    """(message, traceback) from the reply file, else from the stderr tail."""
    msg = (f.reply() or {}).get("message")
    if isinstance(msg, dict) and msg.get("message"):
        return str(msg["message"]), str((msg.get("extraInfo") or {}).get("py_callstack") or "")
    tail = f.stderr_tail.rstrip("\n")
    if f.signal:
        return f"Signal {-f.exit_code} ({f.signal}) received by PID {f.pid}", tail
    tb = last_traceback(f.stderr())
    if tb is None:
        return f"exited with code {f.exit_code}", tail
    return tb.exception, tb.text


def error_record(
    f: Failure, diagnosis: Diagnosis | None = None, stopped: Sequence[int] = ()
) -> dict[str, Any]:
    """torchelastic's error-file shape plus trainlaunch's keys (rank, signal, host, the peers
    stopped because of it, why: its diagnosis)."""
    message, trace = _headline(f)
    return {
        "message": {
            "message": message,
            "extraInfo": {"py_callstack": trace, "timestamp": str(f.timestamp())},
            "errorCode": f.exit_code,
        },
        "errorCode": f.exit_code,
        "rank": f.rank,
        "local_rank": f.local_rank,
        "node_rank": f.node_rank,
        "pid": f.pid,
        "exit_code": f.shell_code,
        "signal": f.signal,
        "attempt": f.attempt,
        "hostname": socket.gethostname(),
        "error_file": f.error_file if f.reply() else None,
        "stderr_file": f.stderr_file or None,
        "peak_rss": f.peak_rss,
        "stopped": list(stopped),
        "diagnosis": diagnosis.to_dict() if diagnosis else None,
    }


def summary(
    script: str,
    root: Failure,
    others: Sequence[Failure],
    restarts: int,
    max_restarts: int,
    diagnosis: Diagnosis | None = None,
    stopped: Sequence[int] = (),
) -> str:
    """The text printed on stderr when the node fails."""
    message, trace = _headline(root)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(root.timestamp()))
    lines = [
        f"[trainlaunch] {script} FAILED (restarts: {restarts}/{max_restarts})",
        f"root cause (first failure): rank {root.rank} (local_rank {root.local_rank}, "
        f"node {root.node_rank}, host {socket.gethostname()}, pid {root.pid}) {root.how()} "
        f"at {when}",
        f"  {message}",
    ]
    if diagnosis is not None:
        lines.append(f"  why: {diagnosis.line}")
        lines += [f"    {e}" for e in diagnosis.evidence]
    if trace and trace.strip() != message:
        lines += ["  " + ln for ln in trace.rstrip("\n").splitlines()]
    where = root.error_file if root.reply() else root.stderr_file
    if where:
        lines.append(f"  see: {where}")
    for o in others:
        lines.append(f"also failed: rank {o.rank} (local_rank {o.local_rank}) {o.how()}")
    if stopped:
        who = ("rank " if len(stopped) == 1 else "ranks ") + rank_list(stopped)
        lines.append(f"stopped because of it: {who}")
    return "\n".join(lines) + "\n"
