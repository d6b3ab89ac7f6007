"""The preflight probes of one node: the probe script (preflight/probe.py), one per local rank.

Started with exactly the real ranks' command interpreter and environment (torchrun's worker
variables included), each with its own pipe for the JSON lines it reports (only local rank
0 reports; the pipe's end tells that a probe exited) and its stdin for the agent's ``go``.
Their output goes to ``<run dir>/preflight/<local rank>.log``; every probe dies with the
agent (PR_SET_PDEATHSIG) and in its own session, like a worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

from trainlaunch.agent.plan import NodePlan, worker_env
from trainlaunch.agent.workers import Spawner, killpg
from trainlaunch.preflight.probe import write_probe

TAIL_BYTES = 4096


class Probe:
    """One probe process: what it reported, and whether it has exited."""

    def __init__(
        self,
        local_rank: int,
        proc: subprocess.Popen[bytes],
        fd: int,
        log: str,
        sel: selectors.BaseSelector,
    ) -> None:
        self.local_rank, self.proc, self.fd, self.log, self.sel = local_rank, proc, fd, log, sel
        self.buf = b""
        self.lines: list[dict[str, Any]] = []
        self.closed = False  # its pipe ended: it exited (or closed it)

    def on_ready(self, events: int) -> None:
        """Its pipe is readable (the agent's loop): read what it wrote; at its end, unregister
        the pipe and reap the probe."""
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.buf += data
            *whole, self.buf = self.buf.split(b"\n")
            for line in whole:
                with contextlib.suppress(ValueError):
                    value = json.loads(line)
                    if isinstance(value, dict):
                        self.lines.append(value)
            return
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(self.fd)
        os.close(self.fd)
        self.closed = True
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)  # the pipe ends as it exits

    def reported(self, key: str) -> Any:
        """The last value it reported under key (facts, bandwidth, error), or None."""
        return next((line[key] for line in reversed(self.lines) if key in line), None)

    def why(self) -> str:
        """How it ended, with the last line of its output (for a problem's text)."""
        code = self.proc.returncode
        how = f"exited with code {code}" if code is not None and code >= 0 else "was killed"
        last = ""
        with contextlib.suppress(OSError), open(self.log, "rb") as f:
            f.seek(max(os.fstat(f.fileno()).st_size - TAIL_BYTES, 0))
            lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines()]
            last = next((ln for ln in reversed(lines) if ln), "")
        return f"the probe {how}" + (f": {last}" if last else "") + f" (log: {self.log})"

    def go(self, yes: bool) -> None:
        """Tell it to run the all-reduce (yes) or to leave (end of its input)."""
        stdin = self.proc.stdin
        if stdin is None or stdin.closed:
            return
        with contextlib.suppress(OSError):
            if yes:
                stdin.write(b"go\n")
            stdin.close()

    def kill(self) -> None:
        """SIGKILL its process group (it leads its own session) and reap it."""
        if self.proc.poll() is None:
            killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)


def probe_python(plan: NodePlan, no_python: bool, environ: Mapping[str, str]) -> str:
    """The ranks' interpreter (a script run without python: the agent's own)."""
    if not no_python:
        return plan.command[0]
    return environ.get("PYTHON_EXEC") or sys.executable


def start(
    plan: NodePlan,
    python: str,
    port: int,
    run_id: str,
    run_dir: str,
    probe_args: list[str],
    sel: selectors.BaseSelector,
) -> list[Probe]:
    """Start one probe per local rank (their pipes registered in sel, data = the Probe)."""
    log_dir = os.path.join(run_dir, "preflight") if run_dir != os.devnull else ""
    try:
        script = write_probe(log_dir or tempfile.mkdtemp(prefix="trainlaunch-preflight-"))
    except OSError as e:
        raise ProbeStartError(f"cannot write the probe: {e.strerror or e}") from None
    preexec = Spawner().preexec
    probes: list[Probe] = []
    for lr in range(plan.nproc):
        r, w = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(r, False)
        env = {
            **os.environ,
            **worker_env(plan, lr, 0, port, run_id, os.devnull, os.environ),
        }
        log = os.path.join(log_dir, f"{lr}.log") if log_dir else os.devnull
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            proc = subprocess.Popen(
                [python, "-u", script, "--fd", str(w), *probe_args],
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=out,
                pass_fds=(w,),
                start_new_session=True,
                preexec_fn=preexec,
            )
        except OSError as e:
            os.close(r)
            for started in probes:
                started.kill()
            raise ProbeStartError(f"cannot start {python!r}: {e.strerror or e}") from None
        finally:
            os.close(w)
            os.close(out)
        probe = Probe(lr, proc, r, log, sel)
        sel.register(r, selectors.EVENT_READ, probe)
        probes.append(probe)
    return probes


class ProbeStartError(Exception):
    """The ranks' interpreter could not be started at all."""
