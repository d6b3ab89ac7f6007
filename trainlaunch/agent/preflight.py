"""The node agent's preflight (``--preflight``): every node checked before any rank starts.

On every node, inside the agent's own selector loop (node 0 keeps serving its store):

1. node 0 hosts the store the ranks will use (the port the backend gave it); every node
   starts its probes (agent/probes.py: the ranks' interpreter and environment) and connects
   to that store as a plain c10d client (agent/storeclient.py);
2. each node sets its fingerprint (preflight/facts.py + the probe's facts) under
   ``trainlaunch/preflight/fp/<node>``; node 0 compares them all (preflight/compare.py) and
   sets the verdict under ``check``, which every node waits for;
3. if they agree, the probes get their ``go`` and time all-reduces; each node sets its
   figures under ``bw/<node>``, node 0 judges them (preflight/bandwidth.py) and sets
   ``result``. Only then do the real ranks start, in the same agents, on the same store.

Whatever stops it (a difference, a node that cannot reach the store or never reports, a
failed or slow all-reduce) is a :class:`~trainlaunch.preflight.report.Verdict` with
problems; the agent prints it, records it in agent.json and exits
``settings.PREFLIGHT_EXIT_CODE``. A node that fails on its own (its store port is taken,
node 0 is unreachable) decides alone; node 0 reports nodes that never came as such.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from trainlaunch import settings
from trainlaunch.agent import probes as probe_procs
from trainlaunch.agent.flags import AgentArgs
from trainlaunch.agent.plan import NodePlan
from trainlaunch.agent.state import AgentRecord, write_atomic
from trainlaunch.agent.storeclient import Reply, StoreClient, StoreClosed
from trainlaunch.node.agent_record import PREFLIGHT_EXCLUDE_FILE
from trainlaunch.preflight import bandwidth, compare, facts
from trainlaunch.preflight.options import PreflightOptions
from trainlaunch.preflight.report import Problem, Verdict, node_labels, render
from trainlaunch.preflight.sockets import port_holder

# Node 0 waits this much longer than the others for what they report, and they wait twice as
# long for its verdict: a node that cannot take part says so itself, first and most precisely.
REPORT_GRACE_S = 5.0
CONNECT_RETRY_S = 0.2
PING_TIMEOUT_S = 10.0


class Interrupted(Exception):
    """A signal the agent handles arrived during the preflight (args[0]: its number)."""


class _Late(Exception):
    """The deadline passed before what was awaited happened."""


def key(name: str) -> str:
    """A preflight key in node 0's store (apart from every key the ranks use)."""
    return settings.PREFLIGHT_STORE_PREFIX + name


class Preflight:
    """One node's part of the preflight; :meth:`run` returns the verdict for the job."""

    def __init__(
        self,
        args: AgentArgs,
        plan: NodePlan,
        sel: selectors.BaseSelector,
        wait: Callable[[float], None],
        pending: list[int],
        host_store: Callable[[], int],
        run_id: str,
        run_dir: str,
    ) -> None:
        opts = PreflightOptions.from_flags(args.values)
        assert opts is not None, "the agent runs a preflight only with --preflight"
        self.args, self.plan, self.opts, self.sel, self.wait = args, plan, opts, sel, wait
        self.pending, self.host_store = pending, host_store
        self.run_id, self.run_dir = run_id, run_dir
        self.started = time.monotonic()
        self.deadline = self.started + opts.timeout
        self.node = plan.node_rank
        self.name = facts.node_name(os.environ)
        self.fingerprint: dict[str, Any] = {}
        self.probes: list[probe_procs.Probe] = []
        self.client: StoreClient | None = None

    def run(self) -> Verdict:
        """Take part in the preflight; the job's verdict (or this node's own, if it is cut off)."""
        try:
            verdict = self._run()
        finally:
            for p in self.probes:
                p.kill()
            if self.client is not None:
                self.client.close()
        return Verdict(
            verdict.nodes,
            verdict.problems,
            verdict.bandwidth,
            time.monotonic() - self.started,
            verdict.stage,
            verdict.names,
        )

    # -- the stages ------------------------------------------------------------------------------

    def _run(self) -> Verdict:
        port = self.plan.master_port or 0
        if self.node == 0:
            try:
                port = self.host_store()
            except OSError as e:
                return self._alone("store", *_cannot_listen(self.name, port, e))
        try:
            self.probes = probe_procs.start(
                self.plan,
                probe_procs.probe_python(self.plan, self.args.no_python, os.environ),
                port,
                self.run_id,
                self.run_dir,
                self._probe_args(),
                self.sel,
            )
        except probe_procs.ProbeStartError as e:
            self.fingerprint = {"torch": None, "torch_error": str(e)}
        problem = self._connect(self.plan.master_addr, port)
        if problem is not None:
            return self._alone("store", problem.found, problem.fix)
        self.fingerprint = {**self._node_facts(), **self._probe_facts()}
        client = self._client()
        client.set(key(f"fp/{self.node}"), json.dumps(self.fingerprint).encode())
        verdict = self._tell("check", self._compare()) if self.node == 0 else self._read("check")
        if not verdict.ok:
            return verdict
        for p in self.probes:
            p.go(True)
        client.set(key(f"bw/{self.node}"), json.dumps(self._probe_bandwidth()).encode())
        if self.node == 0:
            return self._tell("result", self._judge(verdict.names))
        return self._read("result")

    def _node_facts(self) -> dict[str, Any]:
        return facts.node_facts(self.node, os.environ, self.opts.extra_env())

    def _probe_args(self) -> list[str]:
        modules, path0 = facts.entry_modules(
            self.args.script, bool(self.args.module), os.getcwd(), os.environ
        )
        modules = [m for m in modules if m not in sys.stdlib_module_names]
        return [
            *("--modules", ",".join(modules)),
            *("--path0", path0),
            *("--timeout", str(max(self.deadline - time.monotonic(), 1.0))),
            *("--store-prefix", key("pg/")),
        ]

    def _probe_facts(self) -> dict[str, Any]:
        if not self.probes:
            return self.fingerprint  # the interpreter did not start: why is in there
        lead = self.probes[0]
        try:
            self._until(lambda: lead.reported("facts") is not None or lead.closed)
        except _Late:
            return {"torch": None, "torch_error": "the probe did not answer in time"}
        reported = lead.reported("facts")
        if reported is None:
            return {"torch": None, "torch_error": lead.why()}
        return dict(reported)

    def _probe_bandwidth(self) -> dict[str, Any]:
        if not self.probes:
            return {"error": "no probe ran"}
        try:
            self._until(lambda: all(p.closed for p in self.probes))
        except _Late:
            return {"error": "the all-reduce did not end in time (a node cannot reach another?)"}
        lead = self.probes[0]
        error = lead.reported("error")
        failed = next((p for p in self.probes if p.proc.returncode != 0), None)
        if error or failed is not None:
            return {"error": error or (failed.why() if failed else "")}
        return dict(lead.reported("bandwidth") or {"error": lead.why()})

    def _compare(self) -> Verdict:
        fps, missing = self._gather("fp")
        problems = [_absent(r, "fingerprint") for r in missing]
        names = {int(fp["node_rank"]): str(fp.get("node") or "?") for fp in fps}
        if len(fps) == self.plan.nnodes:
            problems += compare.compare(fps, self.opts)
        return Verdict(self.plan.nnodes, tuple(problems), names=names)

    def _judge(self, names: Mapping[int, str]) -> Verdict:
        results, missing = self._gather("bw")
        by_node = {r: res for r, res in enumerate(results)}
        backend = next((str(r.get("backend")) for r in results if r.get("backend")), "")
        summary, problems = bandwidth.evaluate(
            by_node, names, node_labels(names), self.opts.slow_factor_for(backend)
        )
        problems = [_absent(r, "all-reduce result") for r in missing] + problems
        return Verdict(self.plan.nnodes, tuple(problems), summary, stage="all-reduce", names=names)

    def _alone(self, check: str, found: str, fix: str) -> Verdict:
        """This node's own failure (it cannot take part): the job's verdict as far as it knows."""
        problem = Problem(self.node, check, found, "", fix, self.name)
        return Verdict(self.plan.nnodes, (problem,), names={self.node: self.name}, stage="connect")

    # -- the store -------------------------------------------------------------------------------

    def _client(self) -> StoreClient:
        assert self.client is not None
        return self.client

    def _connect(self, host: str, port: int) -> Problem | None:
        where = f"{host}:{port}"
        who = f"node {self.node} ({self.name})"
        while True:
            try:
                self.client = StoreClient.connect(host, port, self.sel)
                break
            except OSError as e:
                why = e.strerror or str(e) or type(e).__name__
                if time.monotonic() + CONNECT_RETRY_S > self.deadline:
                    return Problem(
                        self.node,
                        "store",
                        f"cannot reach {where} ({why})",
                        "reachable",
                        f"{who} cannot reach {where} ({why}): is node 0's agent running, and the "
                        "port open between the nodes (firewall)?",
                        self.name,
                    )
                self._pause(CONNECT_RETRY_S)
        client = self.client
        try:
            self._until(
                lambda: client.validated, min(self.deadline, time.monotonic() + PING_TIMEOUT_S)
            )
        except (_Late, StoreClosed) as e:
            why = str(e) or "no c10d store answered"
            return Problem(
                self.node,
                "store",
                f"{where}: {why}",
                "node 0's store",
                f"{who} cannot reach the store at {where}: {why} (another program holds the port?)",
                self.name,
            )
        return None

    def _tell(self, name: str, verdict: Verdict) -> Verdict:
        """Node 0: set the verdict; when it fails, give the others time to read it before this
        agent (and its store) goes away: each acknowledges under ack/<name>/<node>."""
        self._client().set(key(name), json.dumps(verdict.to_dict()).encode())
        if not verdict.ok:
            until = time.monotonic() + REPORT_GRACE_S
            # decided: a stop now (srun's --kill-on-bad-exit once another node has exited)
            # must not turn the verdict into a cancellation, so every node exits the same
            with contextlib.suppress(_Late, StoreClosed, Interrupted):
                for r in sorted(verdict.names):
                    if r:
                        self._await(self._client().wait([key(f"ack/{name}/{r}")]), 0, until)
        return verdict

    def _read(self, name: str) -> Verdict:
        """Wait for node 0's word under name (the deadline past it: this node's own verdict)."""
        try:
            value = self._get(name, 2 * REPORT_GRACE_S)
        except (_Late, StoreClosed) as e:
            why = "node 0 gave no verdict in time" if isinstance(e, _Late) else str(e)
            return self._alone("verdict", why, f"{self.name}: {why} (see node 0's log)")
        self._client().set(key(f"ack/{name}/{self.node}"), b"1")
        return Verdict.from_dict(json.loads(value))

    def _gather(self, prefix: str) -> tuple[list[dict[str, Any]], list[int]]:
        """Every node's value under prefix/<node>, in node order, and the nodes that never set it."""
        found: list[dict[str, Any]] = []
        missing: list[int] = []
        for r in range(self.plan.nnodes):
            try:
                found.append(json.loads(self._get(f"{prefix}/{r}", REPORT_GRACE_S)))
            except _Late:
                missing += range(r, self.plan.nnodes)  # one WAIT at a time: the rest unknown
                break
        return found, missing

    def _get(self, name: str, grace: float) -> bytes:
        """WAIT for a key, then GET it (a store drops a GET of a missing key)."""
        client = self._client()
        self._await(client.wait([key(name)]), grace)
        value = self._await(client.get(key(name)), grace)
        if not isinstance(value, bytes):
            raise StoreClosed(f"the store answered {type(value).__name__} for {name}")
        return value

    # -- the loop --------------------------------------------------------------------------------

    def _await(self, reply: Reply, grace: float, until: float | None = None) -> object:
        self._until(lambda: reply.done, self.deadline + grace if until is None else until)
        return reply.value

    def _until(self, done: Callable[[], bool], deadline: float | None = None) -> None:
        """Run the loop until done() (_Late at the deadline, Interrupted on a signal)."""
        end = self.deadline if deadline is None else deadline
        while not done():
            left = end - time.monotonic()
            if left <= 0:
                raise _Late
            self._pause(left)

    def _pause(self, seconds: float) -> None:
        """One turn of the agent's loop (its store, our client and probes); notice signals."""
        if self.pending:
            raise Interrupted(self.pending[0])
        self.wait(max(seconds, 0.0))
        if self.pending:
            raise Interrupted(self.pending[0])


def _absent(node: int, what: str) -> Problem:
    return Problem(
        node,
        "store",
        f"no {what}",
        "reported",
        f"node {node} did not report its {what} in time: did it start, and can it reach "
        "node 0? (see its log)",
    )


def _cannot_listen(name: str, port: int, e: OSError) -> tuple[str, str]:
    why = e.strerror or str(e)
    holder = port_holder(port)
    held = f"; held by {holder}" if holder else ""
    return (
        f"cannot listen on port {port} ({why}{held})",
        f"node 0 ({name}) cannot listen on port {port} for the ranks' store ({why}{held}): "
        "free the port or choose another (dist.ddp --master-port, --cfg rdzv_port)",
    )


def conclude(
    check: Preflight, record: AgentRecord, error_file: str, environ: Mapping[str, str]
) -> dict[str, Any] | None:
    """Run the preflight, print and record its verdict; the failure record when it failed.

    A failed one is also written to the agent's own error file (the backend's reply file:
    ``status`` shows the table) and, with the names of the nodes it blamed, to
    ``preflight.exclude`` in the replica's directory (Slurm's batch script reads it).
    """
    verdict = check.run()
    text = render(verdict, verdict.labels())
    with contextlib.suppress(OSError):  # the reader (a killed supervisor) may be gone
        os.write(2, "".join(f"[trainlaunch] {line}\n" for line in text.splitlines()).encode())
    record.update(preflight={**verdict.to_dict(), "fingerprint": check.fingerprint})
    if verdict.ok:
        return None
    failed = failure_record(verdict, text, check.node)
    if error_file:
        write_atomic(error_file, failed)
    where = environ.get(settings.REPLICA_LOG_DIR)
    if where and verdict.bad_nodes():
        with contextlib.suppress(OSError):
            path = os.path.join(where, PREFLIGHT_EXCLUDE_FILE)
            with open(path, "w", encoding="utf-8") as f:
                f.write("".join(f"{n}\n" for n in verdict.bad_nodes()))
    return failed


def failure_record(verdict: Verdict, text: str, node_rank: int) -> dict[str, Any]:
    """The torchelastic-shaped error file of a node whose preflight refused the job."""
    code = settings.PREFLIGHT_EXIT_CODE
    return {
        "message": {
            "message": text.splitlines()[0] if text else "preflight FAILED",
            "extraInfo": {"py_callstack": text, "timestamp": str(int(time.time()))},
            "errorCode": code,
        },
        "errorCode": code,
        "node_rank": node_rank,
        "exit_code": code,
        "preflight": verdict.to_dict(),
    }
