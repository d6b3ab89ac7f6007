"""Why a failed rank failed, from what this node can see (the rules: trainlaunch/diagnosis).

Whoever starts ranks (the node agent, the local supervisor) notes its memory cgroup's
OOM-kill count when an attempt starts; when a rank fails it hands over what it knows (exit
status, stderr, peak memory from wait4) and this gathers the rest: the cgroup's or the node's
memory limit, the kernel log's OOM lines about the pid, the holder of a port the rank could
not bind, /dev/shm's size after a bus error.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainlaunch.node import evidence

if TYPE_CHECKING:
    from trainlaunch.diagnosis.values import Diagnosis


class Witness:
    """What the agent saw of its node since the attempt started."""

    def __init__(self) -> None:
        self.cgroup = evidence.memory_cgroup()
        self.oom_base: int | None = None

    def attempt_started(self) -> None:
        """Note the cgroup's OOM kills so far (a failure compares against them)."""
        self.oom_base = self.cgroup.oom_kills() if self.cgroup else None

    def diagnose(
        self,
        rank: int,
        exit_code: int,
        pid: int,
        stderr: str,
        peak_rss: int | None = None,
        node_rank: int | None = None,
        sent_by: str = "",
        nproc: int | None = None,
        nnodes: int | None = None,
    ) -> Diagnosis:
        """The one-line explanation of a rank's end (exit_code: Popen's, -N for signal N)."""
        from trainlaunch.diagnosis.rules import RankEnd, explain, ports_named  # on a failure only

        sig = -exit_code if exit_code < 0 else 0
        oom = None
        if self.cgroup is not None and self.oom_base is not None:
            now = self.cgroup.oom_kills()
            oom = None if now is None else now - self.oom_base
        limit, where = None, ""
        found = self.cgroup.limit() if self.cgroup else None
        if found is not None:
            limit, where = found[0], "cgroup limit"
        else:
            limit, where = evidence.node_memory(), "node memory"
        kernel: list[str] = []
        note = ""
        if sig == signal.SIGKILL and pid:
            kernel, note = evidence.kernel_oom_lines(pid)
        shm = evidence.shm_size() if sig == signal.SIGBUS or "shared memory" in stderr else None
        holders = {p: evidence.port_holder(p) for p in ports_named(stderr)[:3]}
        return explain(
            RankEnd(
                rank=rank,
                exit_code=exit_code,
                host=socket.gethostname(),
                node_rank=node_rank,
                pid=pid,
                stderr=stderr,
                peak_rss=peak_rss,
                memory_limit=limit,
                limit_where=where,
                oom_kills=oom,
                cgroup=str(self.cgroup.dir) if self.cgroup else "",
                kernel=tuple(kernel),
                kernel_note=note,
                shm=shm,
                port_holders={p: h for p, h in holders.items() if h},
                sent_by=sent_by,
                nproc=nproc,
                nnodes=nnodes,
            )
        )


STOPPED_CODES = (-signal.SIGTERM, -signal.SIGKILL, -signal.SIGINT)  # an agent's own stop


def stopped_node_failure(agent: Mapping[str, Any] | None) -> Diagnosis | None:
    """A node agent that was stopped while some of its ranks had already failed on their own
    (the collective lost a peer on another node: a traceback, even if the stop signal ended
    the process): the first such rank, from its stderr file."""
    if not agent or not agent.get("attempt_dir"):
        return None
    from trainlaunch.diagnosis.rules import RankEnd, explain
    from trainlaunch.diagnosis.traceback import START as TRACEBACK

    for w in agent.get("workers") or []:
        code = w.get("exit_code") if isinstance(w, Mapping) else None
        if not isinstance(code, int) or code == 0:
            continue
        path = os.path.join(str(agent["attempt_dir"]), str(w.get("local_rank", 0)), "stderr.log")
        try:
            with open(path, "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - (1 << 20)))
                stderr = f.read().decode("utf-8", "replace")
        except OSError:
            stderr = ""
        rank = w.get("rank")
        if not isinstance(rank, int) or (code in STOPPED_CODES and TRACEBACK not in stderr):
            continue
        return explain(RankEnd(rank, code, str(agent.get("hostname") or ""), stderr=stderr))
    return None


__all__ = ["Witness", "stopped_node_failure"]
