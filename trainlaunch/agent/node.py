"""The torch-free agent's loop for one node: start, watch, restart, stop, report.

Single-threaded and event-driven: one selector waits on the workers' output pipes, a pidfd
per worker (exit order is the order the kernel reports them: the root cause's tie-breaker)
and the signal wakeup pipe. Nothing polls on a timer, so exits and log lines are seen as
they happen.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import selectors
import signal
import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainlaunch import settings
from trainlaunch.agent import flags, logs
from trainlaunch.agent.failures import Failure, error_record, root_cause, summary
from trainlaunch.agent.plan import NodePlan, worker_env
from trainlaunch.agent.recorder import Recorders
from trainlaunch.agent.state import AgentRecord, agent_file, write_atomic
from trainlaunch.agent.tcpstore import TCPStoreServer, only_this_host

if TYPE_CHECKING:
    from trainlaunch.agent.joins import Joins
    from trainlaunch.agent.terminal import Terminal
from trainlaunch.agent.workers import Spawner, Worker, WorkerStartError
from trainlaunch.node.exits import signal_name
from trainlaunch.node.interleave import COMBINED_FILE, Combined, open_log
from trainlaunch.node.processes import interrupt_term_wait, stop_with_grace
from trainlaunch.node.witness import Witness
from trainlaunch.values import frozen

_WAKE = "wake"
EXIT_BARRIER_S = 300.0  # torchrun's exit_barrier_timeout: how long the store waits for others
WARNING_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)
WARNING_POLL_S = 0.2  # how often to look whether a worker catches a pending warning yet


def catches(pid: int, sig: int) -> bool:
    """Whether process pid has a handler for sig (Linux: SigCgt; elsewhere assume so)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        return True
    return True


@frozen
class Outcome:
    """How an attempt ended: all succeeded, some failed, or the agent got a signal."""

    kind: str  # "ok" | "failed" | "signal"
    failures: tuple[Failure, ...] = ()
    signum: int = 0


def workers(n: int, every: bool = False) -> str:
    """``1 worker``, ``3 workers`` (``all 3 workers`` with every)."""
    return "1 worker" if n == 1 else f"{'all ' if every else ''}{n} workers"


def shutdown_timeout(args: flags.AgentArgs, environ: Mapping[str, str]) -> float:
    """--shutdown-timeout, else TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30 s (torchrun's rule)."""
    if args.shutdown_timeout is not None:
        return float(args.shutdown_timeout)
    return float(environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "30"))


def new_run_id() -> str:
    """A uuid4, as torchrun's default single-node run id (``str(uuid.uuid4())``, built here:
    the uuid module's import, platform with it, costs ~2 ms of every agent start)."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class NodeAgent:
    """Runs one node's workers with torchrun's contract and restart semantics."""

    def __init__(self, args: flags.AgentArgs, plan: NodePlan, environ: Mapping[str, str]):
        self.args, self.plan, self.environ = args, plan, environ
        self.own_error_file = environ.get("TORCHELASTIC_ERROR_FILE", "")
        self.grace = shutdown_timeout(args, environ)
        self.signals = flags.parse_signals(args.signals_to_handle)
        # the time-limit warnings (Slurm's --signal): forwarded to the workers, never a stop
        self.warn_signals = tuple(s for s in WARNING_SIGNALS if s not in self.signals)
        ignored = tuple(s for s in self.warn_signals if signal.getsignal(s) == signal.SIG_IGN)
        self.tee = flags.parse_std(args.tee, "--tee")
        self.redirects = flags.parse_std(args.redirects, "--redirects")
        self.ranks_filter = flags.parse_ranks_filter(args.local_ranks_filter)
        self.prefix_template = environ.get("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE")
        self.run_id = plan.run_id or new_run_id()
        replica_dir = environ.get(settings.REPLICA_LOG_DIR)
        self.run_dir = logs.make_run_dir(args.log_dir or replica_dir, self.run_id)
        where = replica_dir or (self.run_dir if self.run_dir != os.devnull else "")
        if where:
            os.makedirs(where, exist_ok=True)
        self.record = AgentRecord(
            agent_file(where) if where else None,
            engine="agent",
            reason=plan.reason,
            hostname=socket.gethostname(),
            node_rank=plan.node_rank,
            nnodes=plan.nnodes,
            nproc=plan.nproc,
            world_size=plan.world_size,
            run_id=self.run_id,
            run_dir=self.run_dir,
            max_restarts=plan.max_restarts,
            master_addr=plan.master_addr,
            command=list(plan.command),
        )
        self.sel = selectors.DefaultSelector()
        self.spawner = Spawner(ignored)
        self.pending: list[int] = []  # handled signals received, in order
        self.warnings: list[int] = []  # warning signals received, not yet handed out
        self.undelivered: dict[int, set[int]] = {}  # worker pid -> warnings it cannot take yet
        self.workers: list[Worker] = []
        self.streams: list[logs.Stream] = []
        self.order: dict[int, int] = {}  # local rank -> reaping order (a global counter)
        self.rows_stale = False  # a worker exited since agent.json's workers were written
        self.exit_fds: dict[int, int] = {}  # local rank -> pidfd, until reaped
        self.counter = itertools.count()
        self.pidfds = hasattr(os, "pidfd_open")
        self.attempt = 0
        self.store: TCPStoreServer | None = None  # node 0 hosts the c10d store, as torchrun
        self.joins: Joins | None = None  # several nodes: who turned up (says when one is late)
        self.recorders = Recorders(environ)  # torch's Flight Recorder, for hangs
        self.witness = Witness()  # what explains a failure (docs/failures.md)
        self.terminal: Terminal | None = None  # `trainlaunch torchrun` on a terminal: ranks see one
        if environ.get(settings.TTY):
            from trainlaunch.agent.terminal import Terminal

            self.terminal = Terminal(environ, self.sel, self._note) or None

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> int:
        """Run attempts until success, failure without restarts left, or a signal."""
        self._install_signals()
        try:
            return self._run()
        finally:
            for w in self.workers:  # an unexpected error must not leave ranks behind
                if w.exit_code is None:
                    w.signal_group(signal.SIGKILL)
            if self.store is not None:
                self.store.close()
            if self.terminal is not None:
                self.terminal.close()
            self.recorders.close()

    def _run(self) -> int:
        if self.args.preflight:
            code = self._preflight()
            if code is not None:
                return code
        while True:
            outcome = self._start_attempt()
            if outcome.kind == "ok":
                self._close_streams()
                self._serve_other_nodes()
                self._finish("SUCCEEDED", 0)
                return 0
            if outcome.kind == "signal":
                name = signal.Signals(outcome.signum).name
                self._note(f"got {name}: forwarding it to {workers(len(self.workers), every=True)}")
                self._stop(outcome.signum)
                if self._all_requeue():  # the ranks saved their state and asked for a requeue
                    return self._finish("REQUEUE", settings.REQUEUE_EXIT_CODE)
                return self._finish("CANCELLED", 128 + outcome.signum)
            if all(f.exit_code == settings.REQUEUE_EXIT_CODE for f in outcome.failures):
                self._note(
                    f"rank {outcome.failures[0].rank} asked for a requeue (exit "
                    f"{settings.REQUEUE_EXIT_CODE}); waiting for the other workers to end"
                )
                self._drain()
                self._stop(signal.SIGTERM)
                return self._finish("REQUEUE", settings.REQUEUE_EXIT_CODE)
            self._stop(signal.SIGTERM)
            root = root_cause(outcome.failures)
            others = [f for f in outcome.failures if f is not root]
            if self.attempt < self.plan.max_restarts and not self.pending:
                self._note(
                    f"rank {root.rank} {root.how()}; restarting "
                    f"{workers(self.plan.nproc, every=True)} "
                    f"(restart {self.attempt + 1} of {self.plan.max_restarts})"
                )
                self._end_attempt("FAILED", root)
                self.attempt += 1
                continue
            why = self.witness.diagnose(
                root.rank, root.exit_code, root.pid, root.stderr(), root.peak_rss, root.node_rank,
                nproc=self.plan.nproc, nnodes=self.plan.nnodes,
            )  # fmt: skip
            failed = {f.rank for f in outcome.failures}
            stopped = sorted(w.rank for w in self.workers if w.rank not in failed and w.exit_code)
            record = error_record(root, why, stopped)
            if self.own_error_file:
                write_atomic(self.own_error_file, record)  # the backend's reply file
            with contextlib.suppress(OSError):  # the reader (a killed supervisor) may be gone
                text = summary(
                    self.args.script, root, others, self.attempt, self.plan.max_restarts,
                    why, stopped,
                )  # fmt: skip
                os.write(2, text.encode())
            self._end_attempt("FAILED", root, record)
            return self._finish("FAILED", root.shell_code, record)

    def _start_attempt(self) -> Outcome:
        try:
            port = self._store_port()
        except OSError as e:
            why = WorkerStartError(
                f"cannot host the c10d store on port {self.plan.master_port}: {e.strerror or e}",
                1,
            )
            return Outcome("failed", (self._start_failure(0, "", why),))
        adir = logs.make_attempt_dir(self.run_dir, self.attempt, self.plan.nproc)
        filtered = self._filtered_files(adir)
        self.witness.attempt_started()
        self.workers, self.streams, self.order, self.exit_fds = [], [], {}, {}
        base = dict(os.environ)
        for lr in range(self.plan.nproc):
            err = logs.rank_file(adir, lr, "error.json")
            env = {
                **base,
                **worker_env(self.plan, lr, self.attempt, port, self.run_id, err, os.environ),
                **self.recorders.worker_env(self.attempt, self.plan.rank(lr)),
            }
            try:
                ptys = self._ptys(lr)
                w = self.spawner.start(lr, self.plan.rank(lr), self.plan.command, env, ptys)
            except WorkerStartError as e:
                self._stop(signal.SIGKILL)
                return Outcome("failed", (self._start_failure(lr, adir, e),))
            self.workers.append(w)
            self._watch_worker(w, adir, filtered)
        self.record.update(
            state="RUNNING",
            attempt=self.attempt,
            restarts=self.attempt,
            master_port=port,
            attempt_dir=adir,
            workers=self._worker_rows(),
        )
        if self.plan.nnodes > 1:
            from trainlaunch.agent.joins import Joins

            self.joins = Joins(
                self.plan.node_rank, self.plan.nnodes, self.plan.master_addr, port, self.sel,
                self._note, self._waiting, self.store,
            )  # fmt: skip
        try:
            return self._watch()
        finally:
            if self.joins is not None:  # the attempt ended: a late node is no longer awaited
                self.joins.close()
                self.joins = None

    def _watch(self) -> Outcome:
        while True:
            self._reap()
            self._forward_warnings()
            if self.pending:
                return Outcome("signal", signum=self.pending[0])
            failed = [w for w in self.workers if w.exit_code not in (None, 0)]
            if failed:
                failed.sort(key=lambda w: self.order[w.local_rank])
                return Outcome("failed", tuple(self._failure(w) for w in failed))
            if all(w.exit_code == 0 for w in self.workers):
                return Outcome("ok")
            timeout = WARNING_POLL_S if any(self.undelivered.values()) else None
            due = self.joins.timeout() if self.joins is not None else None
            self._wait(due if timeout is None else timeout if due is None else min(due, timeout))

    def _forward_warnings(self) -> None:
        """Send each warning signal (Slurm's --signal) to every live worker group, as soon as
        the worker catches it: one that has not installed its handler yet gets it later."""
        while self.warnings:
            sig = self.warnings.pop(0)
            alive = [w for w in self.workers if w.exit_code is None]
            self._note(
                f"got {signal.Signals(sig).name}: forwarding it to {workers(len(alive))} "
                "(a warning: they keep running)"
            )
            for w in alive:
                self.undelivered.setdefault(w.pid, set()).add(sig)
        for w in self.workers:
            sigs = self.undelivered.get(w.pid)
            if not sigs or w.exit_code is not None:
                self.undelivered.pop(w.pid, None)
                continue
            for sig in sorted(sigs):
                if catches(w.pid, sig):
                    w.signal_group(sig)
                    sigs.discard(sig)

    def _drain(self) -> None:
        """Give the other workers the grace period to end on their own (they are saving)."""
        deadline = time.monotonic() + self.grace
        while any(w.exit_code is None for w in self.workers) and time.monotonic() < deadline:
            self._wait(deadline - time.monotonic())
            self._reap()
            if self.pending:
                return

    def _all_requeue(self) -> bool:
        codes = [w.exit_code for w in self.workers]
        return bool(codes) and all(c == settings.REQUEUE_EXIT_CODE for c in codes)

    def _store_port(self) -> int:
        """MASTER_PORT: node 0's agent hosts a fresh store for every attempt (torchrun's rule)."""
        if self.plan.node_rank != 0:
            assert self.plan.master_port is not None  # several nodes: the backend's port
            return self.plan.master_port
        if self.store is None:
            self.store = TCPStoreServer(
                self.sel,
                self.plan.master_port or 0,
                loopback=only_this_host(self.plan.master_addr),  # else every interface
                note=self._note,
            )
        elif self.attempt:  # the preflight's store is the first attempt's (its keys apart)
            self.store.reset()
        return self.store.port

    def _preflight(self) -> int | None:
        """--preflight: every node checked before any rank starts (agent/preflight.py).

        None when it passed; else the exit code (PREFLIGHT_EXIT_CODE, or 128+N for a signal).
        """
        from trainlaunch.agent import preflight

        self.record.update(state="PREFLIGHT")
        check = preflight.Preflight(
            self.args,
            self.plan,
            self.sel,
            self._wait,
            self.pending,
            self._store_port,
            self.run_id,
            self.run_dir,
        )
        try:
            failed = preflight.conclude(check, self.record, self.own_error_file, self.environ)
        except preflight.Interrupted as e:
            return self._finish("CANCELLED", 128 + int(e.args[0]))
        if failed is None:
            return None
        # decided: a stop from now on (srun ends the step once another node has exited) must
        # not kill this agent while the interpreter shuts down, which resets its handlers
        for sig in self.signals:
            signal.signal(sig, signal.SIG_IGN)
        return self._finish("FAILED", settings.PREFLIGHT_EXIT_CODE, failed)

    def _serve_other_nodes(self) -> None:
        """Keep the store up while other nodes' ranks still use it (torchrun's exit barrier).

        Every rank keeps its store connection until it exits, so node 0 waits for the
        connections to close (a signal or EXIT_BARRIER_S ends the wait). One node: every
        client was one of our workers, all exited (a leftover child holding a copied socket
        must not keep the agent alive).
        """
        if self.store is None or self.plan.nnodes == 1 or not self.store.clients:
            return
        deadline = time.monotonic() + EXIT_BARRIER_S
        while self.store.clients and not self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                self._note(f"{self.store.clients} store client(s) still connected: leaving")
                return
            self._wait(left)

    def _stop(self, sig: int) -> None:
        """Forward sig to every live worker group, wait the grace period, then SIGKILL.

        An interrupt (SIGINT: Ctrl-C, or a launcher passing one on) goes as torchrun sends it,
        so the ranks' ``except KeyboardInterrupt`` runs: SIGINT, the grace period, SIGTERM to
        the workers still running, INTERRUPT_TERM_S (at most the grace period) later SIGKILL.
        While the workers have their SIGINT, a SIGTERM (the launcher stopping what it was
        asked to stop) does not cut their grace short; a second SIGINT (Ctrl-C twice), a
        SIGHUP or a SIGQUIT does."""
        seen = len(self.pending)
        live = {w.pid: w for w in self.workers if not w.poll()}

        def cut_short() -> bool:  # a second signal
            more = self.pending[seen:]
            if sig == signal.SIGINT:
                more = [s for s in more if s != signal.SIGTERM]
            return bool(more)

        alive = lambda pid: live[pid].exit_code is None  # noqa: E731
        if sig == signal.SIGINT and live:
            term = interrupt_term_wait(self.grace)
            left = stop_with_grace(
                list(live), self.grace, sig=sig, alive=alive, wait=self._wait_reaping,
                cut_short=cut_short, kill_sig=signal.SIGTERM, kill_wait=term,
            )  # fmt: skip
            if left:
                self._note(f"{workers(len(left))} still running {term:g}s after SIGTERM: SIGKILL")
            live = {pid: live[pid] for pid in left}
            sig = signal.SIGKILL
        stop_with_grace(
            list(live),
            self.grace,
            sig=sig,
            alive=alive,
            wait=self._wait_reaping,
            cut_short=cut_short,
            kill_wait=max(self.grace, 5.0),
        )
        for w in self.workers:  # leftovers of each rank's process group go too
            w.signal_group(signal.SIGKILL)
        self._close_streams()

    # -- events ----------------------------------------------------------------------------------

    def _install_signals(self) -> None:
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        self.sel.register(r, selectors.EVENT_READ, _WAKE)
        for sig in self.signals:
            signal.signal(sig, self._on_signal)
        for sig in self.warn_signals:
            signal.signal(sig, self._on_warning)
        if not self.pidfds:
            signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the selector

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.pending.append(signum)

    def _on_warning(self, signum: int, _frame: Any) -> None:
        self.warnings.append(signum)

    def _write_rows(self) -> None:
        """Record the workers that exited since the last write: one write per wake-up, not
        one per worker (256 ranks exiting at once were 256 fsynced writes of 256 rows)."""
        if self.rows_stale:
            self.rows_stale = False
            self.record.update(workers=self._worker_rows())

    def _wait(self, timeout: float | None) -> None:
        self._select(timeout)
        if self.joins is not None:
            self.joins.tick()
        self._write_rows()

    def _select(self, timeout: float | None) -> None:
        for key, events in self.sel.select(timeout):
            data = key.data
            if data == _WAKE:
                with contextlib.suppress(BlockingIOError):
                    os.read(key.fd, 512)
            elif isinstance(data, TCPStoreServer):
                data.on_ready(key, events)
            elif isinstance(data, Worker):
                self._reaped(data)
            elif hasattr(data, "on_ready"):  # the preflight's store client and probes
                data.on_ready(events)
            elif not data.read():
                self._drop(data)

    def _wait_reaping(self, seconds: float) -> None:
        self._wait(seconds)
        self._reap()

    def _reap(self) -> None:
        for w in self.workers:
            if w.exit_code is None and w.poll():
                self._reaped(w)
        self._write_rows()

    def _reaped(self, w: Worker) -> None:
        w.poll()
        if w.exit_code is None or w.local_rank in self.order:
            return
        self.order[w.local_rank] = next(self.counter)
        self.rows_stale = True  # `stack` shows it exited, with its code: _write_rows, once per wake
        fd = self.exit_fds.pop(w.local_rank, None)
        if fd is not None:  # a pidfd stays readable: keeping it would spin the selector
            self.sel.unregister(fd)
            os.close(fd)
        for s in self.streams:  # what it wrote before exiting is already in the pipes
            if s.open and s.local_rank == w.local_rank and not s.read():
                self._drop(s)

    def _drop(self, s: logs.Stream) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(s.fd)
        s.close()
        same_rank = [o for o in self.streams if o.local_rank == s.local_rank]
        if s.combined is not None and not any(o.open for o in same_rank):
            s.combined.close()  # both streams of the rank ended

    def _close_streams(self) -> None:
        for s in self.streams:
            if s.open:
                s.read()
                self._drop(s)
        for fd in self.exit_fds.values():
            self.sel.unregister(fd)
            os.close(fd)
        self.exit_fds.clear()

    # -- workers -----------------------------------------------------------------------------------

    def _ptys(self, local_rank: int) -> dict[int, tuple[int, int]]:
        """A pseudo-terminal for each stream of this rank that the command's terminal shows
        unprefixed (torchrun's console: a --tee'd or redirected stream is a file there too)."""
        term = self.terminal
        if not term:
            return {}
        modes = logs.console_modes(self.tee, self.redirects, self.ranks_filter, local_rank)
        out = {}
        for std in (logs.OUT, logs.ERR):
            if modes[std] == "raw" and term.fd(std) >= 0:
                with contextlib.suppress(OSError):  # no pty left: a pipe, as without a terminal
                    pair = term.pty(std)
                    if pair is not None:
                        out[std] = pair
        return out

    def _watch_worker(self, w: Worker, adir: str, filtered: dict[int, int]) -> None:
        modes = logs.console_modes(self.tee, self.redirects, self.ranks_filter, w.local_rank)
        prefix = logs.line_prefix(self.prefix_template, self.plan.role, w.rank, w.local_rank)
        path = logs.rank_file(adir, w.local_rank, COMBINED_FILE)
        combined = Combined(open_log(path, 0o644, truncate=True) if path else -1)
        for std, name in ((logs.OUT, "stdout.log"), (logs.ERR, "stderr.log")):
            # a rank on a pty is shown live on the terminal; its record (the replica's log)
            # gets whole lines with its prefix, so the command shows them once, and `logs`
            # names their rank
            live = self.terminal if std in w.ptys else None
            needles = (
                self.args.duplicate_stdout_filters
                if std == logs.OUT
                else self.args.duplicate_stderr_filters
            )
            s = logs.Stream(
                w.output_fd(std),
                logs.rank_file(adir, w.local_rank, name),
                std,
                "prefix" if live else modes[std],
                prefix,
                -1 if live else filtered.get(std, -1),  # torchrun filters teed lines only
                needles,
                keep_tail=std == logs.ERR,
                local_rank=w.local_rank,
                combined=combined,
                std=std,
                live=live,
            )
            self.streams.append(s)
            self.sel.register(s.fd, selectors.EVENT_READ, s)
        if self.pidfds:
            try:
                fd = os.pidfd_open(w.pid)
                self.exit_fds[w.local_rank] = fd
                self.sel.register(fd, selectors.EVENT_READ, w)
            except OSError:  # old kernel: fall back to SIGCHLD
                self.pidfds = False
                signal.signal(signal.SIGCHLD, lambda *_: None)

    def _filtered_files(self, adir: str) -> dict[int, int]:
        out = {}
        for std, needles, name in (
            (logs.OUT, self.args.duplicate_stdout_filters, "filtered_stdout.log"),
            (logs.ERR, self.args.duplicate_stderr_filters, "filtered_stderr.log"),
        ):
            if any(needles) and adir != os.devnull:
                out[std] = os.open(
                    os.path.join(adir, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644
                )
        return out

    def _failure(self, w: Worker) -> Failure:
        adir = self.record.data.get("attempt_dir", os.devnull)
        err = next(
            (s for s in self.streams if s.local_rank == w.local_rank and s.tail is not None), None
        )
        assert w.exit_code is not None
        return Failure(
            rank=w.rank,
            local_rank=w.local_rank,
            node_rank=self.plan.node_rank,
            pid=w.pid,
            exit_code=w.exit_code,
            observed=w.ended or time.time(),
            order=self.order.get(w.local_rank, 0),
            attempt=self.attempt,
            error_file=logs.rank_file(adir, w.local_rank, "error.json"),
            stderr_file=logs.rank_file(adir, w.local_rank, "stderr.log"),
            stderr_tail=err.tail_text() if err else "",
            peak_rss=w.peak_rss,
        )

    def _start_failure(self, lr: int, adir: str, e: WorkerStartError) -> Failure:
        return Failure(
            rank=self.plan.rank(lr),
            local_rank=lr,
            node_rank=self.plan.node_rank,
            pid=0,
            exit_code=e.exit_code,
            observed=time.time(),
            order=0,
            attempt=self.attempt,
            error_file="",
            stderr_file="",
            stderr_tail=str(e) + "\n",
        )

    def _worker_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "rank": w.rank,
                "local_rank": w.local_rank,
                "pid": w.pid,
                "pgid": w.pid,
                "ticks": w.ticks,
                "exit_code": w.exit_code,
                "signal": signal_name(w.exit_code, returncode=True),
                "recorder": self.recorders.path(self.attempt, w.rank),
            }
            for w in self.workers
        ]

    # -- reporting -----------------------------------------------------------------------------------

    def _waiting(self, waiting: dict[str, Any] | None) -> None:
        """Record in agent.json which nodes this one waits for (None: no longer), for status."""
        self.record.update(waiting=waiting)

    def _note(self, text: str) -> None:
        with contextlib.suppress(OSError):  # the reader (a killed supervisor) may be gone
            os.write(2, f"[trainlaunch] {text}\n".encode())

    def _end_attempt(
        self, result: str, root: Failure | None, record: dict[str, Any] | None = None
    ) -> None:
        self.record.update(**self._ended_attempt(result, root, record))

    def _ended_attempt(
        self, result: str, root: Failure | None, record: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        attempts = [
            *self.record.data["attempts"],
            {
                "attempt": self.attempt,
                "result": result,
                "root_cause": record or (error_record(root) if root else None),
            },
        ]
        self.rows_stale = False
        return {"attempts": attempts, "workers": self._worker_rows()}

    def _finish(self, state: str, code: int, root: dict[str, Any] | None = None) -> int:
        # one write: the attempt's end and the agent's (two fsynced writes on every exit before)
        ended = self._ended_attempt(state, None) if state != "FAILED" else {}
        ended.update(state=state, exit_code=code, root_cause=root, workers=self._worker_rows())
        ended.update(waiting=None)
        self.record.update(**ended, ended=time.time())
        return code
