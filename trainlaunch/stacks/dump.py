"""Run ``py-spy dump`` on rank processes, all at once, and turn the answers into RankStacks.

py-spy (a PyPI wheel carrying its own binary) is run as a program, never imported. The local
backend calls :func:`dump` directly; on Slurm every node of the job runs
``python -m trainlaunch.stacks.dump`` (one ``srun --overlap`` step) and prints its ranks as JSON.
Torch-free; imports only the pure values and the liveness rule (node/processes.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainlaunch.node import processes
from trainlaunch.stacks.values import ERROR, EXITED, RankStack, parse_pyspy_json
from trainlaunch.values import frozen

PYSPY_TIMEOUT_S = 30.0  # one dump pauses the rank for milliseconds; a slow machine needs more
PTRACE_HINT = (
    "py-spy needs ptrace rights over the rank: the same user and "
    "/proc/sys/kernel/yama/ptrace_scope 0 (or 1 for a parent), or CAP_SYS_PTRACE "
    "(containers: --cap-add SYS_PTRACE)"
)


@frozen
class Target:
    """One rank to dump: where it runs and, if it already ended, how."""

    rank: int
    pid: int | None
    host: str = ""
    role: str = ""
    replica_id: int | None = None
    exit_code: int | None = None  # known exit code: nothing to dump
    ended: bool = False
    recorder: str = ""  # its Flight Recorder socket ('' when off: stacks/recorder.py)

    def stack(self, **fields: Any) -> RankStack:
        """A RankStack for this target."""
        base: dict[str, Any] = {
            "rank": self.rank,
            "pid": self.pid,
            "host": self.host,
            "role": self.role,
            "replica_id": self.replica_id,
        }
        return RankStack(**{**base, **fields})

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (handed to the node side)."""
        return dataclasses.asdict(self)


def pyspy_binary() -> str | None:
    """py-spy next to this interpreter (its venv's bin), else on PATH."""
    here = Path(sys.executable).parent / "py-spy"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    import shutil  # imported when a stack is dumped, not by every reader of the records

    return shutil.which("py-spy")


def dump(
    targets: Sequence[Target], native: bool = False, timeout: float = PYSPY_TIMEOUT_S
) -> list[RankStack]:
    """Dump every live target's stack in parallel (one py-spy per rank, started together),
    with the Flight Recorder dump of each rank that serves one, asked for meanwhile."""
    import subprocess  # only a dump runs py-spy: the CLI's readers import this module too

    recorders = _ask_recorders(targets)

    binary = pyspy_binary()
    procs: dict[int, subprocess.Popen[str]] = {}
    out: dict[int, RankStack] = {}
    for t in targets:
        if t.ended or t.pid is None:
            out[t.rank] = t.stack(state=EXITED, exit_code=t.exit_code)
        elif binary is None:
            out[t.rank] = t.stack(
                state=ERROR, error="py-spy not found (pip install py-spy, or trainlaunch[dev])"
            )
        else:
            cmd = [binary, "dump", "--pid", str(t.pid), "--json"] + (["--native"] if native else [])
            try:
                procs[t.rank] = subprocess.Popen(
                    cmd,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    errors="replace",
                    env=PYSPY_ENV,
                )
            except OSError as e:
                out[t.rank] = t.stack(state=ERROR, error=f"cannot run py-spy: {e.strerror or e}")
    deadline = time.monotonic() + timeout
    by_rank = {t.rank: t for t in targets}
    for rank, proc in procs.items():
        t = by_rank[rank]
        try:
            stdout, stderr = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out[rank] = t.stack(state=ERROR, error=f"py-spy did not answer within {timeout:.0f}s")
            continue
        out[rank] = _result(t, proc.returncode, stdout, stderr)
    for t, (doc, why) in recorders().items():
        out[t.rank] = dataclasses.replace(out[t.rank], recorder=doc, recorder_error=why)
    return [out[t.rank] for t in targets]


# py-spy is a Rust program: RUST_BACKTRACE=1 (set by many shells and CI images) makes it end
# every error with a backtrace whose last line is a frame (`10: main`), not the reason
PYSPY_ENV = {**os.environ, "RUST_BACKTRACE": "0", "RUST_LIB_BACKTRACE": "0"}


def _ask_recorders(targets: Sequence[Target]) -> Any:
    """Start asking every live rank's recorder (one thread each); call the result to collect
    {target: (dump, why none)}."""
    import threading

    from trainlaunch.stacks.recorder import fetch

    answers: dict[Target, tuple[dict[str, Any] | None, str]] = {}
    threads = []
    for t in targets:
        if t.ended or t.pid is None or not t.recorder:
            continue

        def ask(t: Target = t) -> None:
            answers[t] = fetch(t.recorder)

        threads.append(threading.Thread(target=ask, daemon=True))
        threads[-1].start()

    def collect() -> dict[Target, tuple[dict[str, Any] | None, str]]:
        for th in threads:
            th.join()
        return answers

    return collect


def _result(t: Target, rc: int, stdout: str, stderr: str) -> RankStack:
    if rc == 0:
        try:
            return t.stack(threads=parse_pyspy_json(stdout))
        except ValueError as e:
            return t.stack(state=ERROR, error=str(e))
    if t.pid is not None and not processes.alive(t.pid):
        return t.stack(state=EXITED)  # it ended while py-spy attached: the caller finds the code
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    # py-spy's own message, not the last frame of a backtrace (RUST_BACKTRACE=1 adds one)
    error = next((ln.removeprefix("Error:").strip() for ln in lines if ln.startswith("Error:")), "")
    last = error or (lines[-1] if lines else f"exit {rc}")
    if "ermission" in stderr or "ptrace" in stderr.lower() or "EPERM" in stderr:
        last += f" ({PTRACE_HINT})"
    return t.stack(state=ERROR, error=f"py-spy: {last}")


def main(argv: Sequence[str]) -> int:
    """Node side: ``python -m trainlaunch.stacks.dump [--native] TARGETS_JSON``.

    Dumps the targets whose host is this node ($SLURMD_NODENAME, else all) and prints them as
    one JSON list of RankStack documents (with their Flight Recorder dumps).
    """
    args = list(argv[1:])
    native = "--native" in args
    args = [a for a in args if a != "--native"]
    if len(args) != 1:
        print("usage: python -m trainlaunch.stacks.dump [--native] TARGETS_JSON", file=sys.stderr)
        return 2
    node = os.environ.get("SLURMD_NODENAME", "")
    targets = [Target(**d) for d in json.loads(args[0])]
    mine = [t for t in targets if not node or t.host == node]
    print(json.dumps([s.to_dict() for s in dump(mine, native)]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))


__all__ = ["PTRACE_HINT", "Target", "dump", "main", "pyspy_binary"]
