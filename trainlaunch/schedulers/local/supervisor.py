"""The detached, torch-free process that owns one local app.

Started as ``python -m trainlaunch.schedulers.local.supervisor <app_dir>`` in its own session, it
starts every replica as its own process group, reads its stdout and stderr pipes into
``stdout.log``, ``stderr.log`` and ``combined.log`` (both streams in arrival order, see
node/interleave.py), reaps them, applies the retry policy, and records every transition
atomically in ``state.json``. Like torchrun's agent, it is the replicas' reader: a replica
that writes after this process was SIGKILLed gets EPIPE (the app is then reported as lost).
SIGTERM stops the app: SIGTERM to every group, the grace period, then SIGKILL. SIGINT
(Ctrl-C on the command that waits for it) stops it as torchrun passes Ctrl-C on: SIGINT to
every group (the ranks' ``except KeyboardInterrupt`` runs), the grace period, SIGTERM (a node
agent: a second SIGINT, its own "on to SIGTERM"), a few seconds, then SIGKILL. SIGUSR1
(``stop --requeue``) stops it as SIGTERM does and then starts the app again, a *requeue*, as
does a replica that exits with the requeue code (75); requeues count up to ``max_requeues``,
apart from failures. Every run of the whole app is an attempt
in ``state.json`` (reason, start, end). Signals are handled synchronously through a wakeup pipe.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import math
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainlaunch import settings, store
from trainlaunch.errors import StoreError
from trainlaunch.node import appgroup, processes
from trainlaunch.node.agent_record import worker_groups
from trainlaunch.node.exits import shell_code, signal_name
from trainlaunch.node.interleave import (
    COMBINED_FILE,
    STREAM_FILES,
    Combined,
    Pump,
    open_logs,
    write_all,
)
from trainlaunch.node.processes import keep_files_private, killpg
from trainlaunch.node.witness import Witness
from trainlaunch.schedulers.local import queue, slots
from trainlaunch.schedulers.local.launch import APP_FROM_FD, SLOT_FD, await_app

if TYPE_CHECKING:  # imported where used (a failure, the first hang check), after the replicas start
    from trainlaunch.diagnosis import values as diagnoses
    from trainlaunch.stacks.watchdog import Watchdog

STDERR_TAIL_LINES = 20
STORE_FULL = "the app store filled up (no space left on device)"
TIMELINE_INTERVAL_S = 1.0  # granularity of `logs --since/--until` on the local backend
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
REQUEUE_SIGNAL = signal.SIGUSR1  # `trainlaunch stop --requeue`: simulate a preemption
USER_UMASK = 0o022  # replaced in main() by the umask the supervisor was started with


class Replica:
    """One planned process and what happened to it."""

    def __init__(self, plan: dict[str, Any], app_dir: Path) -> None:
        self.plan = plan
        self.role: str = plan["role"]
        self.replica_id: int = plan["replica_id"]
        self.log_dir = app_dir / plan["log_dir"]
        self.state = "PENDING"
        self.pid: int | None = None
        self.ticks: int | None = None
        self.exit_code: int | None = None
        self.signal: str | None = None
        self.restarts = 0
        self.started: float | None = None
        self.ended: float | None = None
        self.message = ""
        self.stderr_offset = 0
        self.last_sizes: tuple[int, ...] | None = None
        self.pumps: list[Pump] = []  # this run's stdout and stderr pipes, until drained
        self.combined: Combined | None = None
        self.peak_rss: int | None = None  # bytes, from wait4 once reaped
        self.failure: diagnoses.Diagnosis | None = None  # why it failed (docs/failures.md)
        self.lost: dict[str, int] = {}  # bytes per log file a full disk cost earlier runs

    def lost_bytes(self) -> dict[str, int]:
        """Bytes of each log file that could not be written (a full disk), this run's too."""
        out = dict(self.lost)
        live = [(STREAM_FILES[p.stream - 1], p.lost) for p in self.pumps]
        if self.combined is not None:
            live.append((COMBINED_FILE, self.combined.lost))
        for name, n in live:
            if n:
                out[name] = out.get(name, 0) + n
        return out

    def sample_timeline(self) -> None:
        """Append (time, size of each log) to timeline.jsonl when the sizes changed.

        `logs --since/--until` map times to byte offsets with it (granularity: one interval).
        """
        names = ("stdout", "stderr", "combined")
        try:
            sizes = tuple((self.log_dir / f"{n}.log").stat().st_size for n in names)
        except OSError:
            return
        if sizes == self.last_sizes:
            return
        self.last_sizes = sizes
        line = json.dumps({"t": round(time.time(), 3), **dict(zip(names, sizes, strict=True))})
        try:
            with open(self.log_dir / "timeline.jsonl", "a") as f:
                f.write(line + "\n")
        except OSError:
            pass  # a full disk must not stop the app; only --since precision suffers

    @property
    def key(self) -> str:
        """role/replica, as shown to users."""
        return f"{self.role}/{self.replica_id}"

    def record(self) -> dict[str, Any]:
        """The JSON record of this replica."""
        return {
            "role": self.role,
            "replica_id": self.replica_id,
            "state": self.state,
            "pid": self.pid,
            "pgid": self.pid,
            "ticks": self.ticks,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "restarts": self.restarts,
            "started": self.started,
            "ended": self.ended,
            "message": self.message,
            "hostname": socket.gethostname(),
            "peak_rss": self.peak_rss,
            "failure": self.failure.to_dict() if self.failure else None,
            "lost": self.lost_bytes(),
        }


class Supervisor:
    """Owns the replicas of one app until they are all done."""

    def __init__(self, app_dir: Path) -> None:
        self.app_dir = app_dir
        self.request = store.read_json(app_dir / "app.json")
        self.grace = float(self.request.get("grace_period") or 10.0)
        roles = {r["name"]: r for r in self.request["app"]["roles"]}
        self.max_retries = {n: int(r.get("max_retries", 0)) for n, r in roles.items()}
        self.policy = {n: r.get("retry_policy", "APPLICATION") for n, r in roles.items()}
        self.replicas = [Replica(p, app_dir) for p in self.request["replicas"]]
        self.by_pid: dict[int, Replica] = {}
        self.exec_failed: list[Replica] = []
        self.state = "PENDING"
        self.msg = ""
        self.num_restarts = 0
        self.max_requeues = int(self.request.get("max_requeues") or 0)
        self.num_requeues = 0
        self.requeue_requested = False
        self.attempts: list[dict[str, Any]] = []
        self.role_restarts: dict[str, int] = {}
        self.exit_code: int | None = None
        self.structured_error_msg = ""
        self.started = time.time()
        self.ended: float | None = None
        self.stop_requested = False
        self.stop_signal = signal.SIGTERM  # SIGINT: an interrupt (Ctrl-C), see terminate
        self.slot_fd: int | None = None  # the slot lock of its group, held until it ends
        self.waiter = os.getppid()  # `run --wait`, or whoever started it (_wake_waiter)
        self.witness = Witness()  # the evidence of a failure: OOM kills, limits, ports
        self.failure: diagnoses.Diagnosis | None = None  # why the app failed or was stopped
        self.stopping: set[int] = set()  # pids this supervisor is stopping (not failures)
        self.store_problem = ""  # e.g. the disk filled up: said in the final record's msg
        self.saved_lost = 0  # output bytes lost (full disk) as of the last record written
        self.cgroup: str | None = None  # the app's cgroup, where this user may make one
        self.strays = 0  # processes stopped that had left the app's process groups
        self.strays_found_by = ""  # how: appgroup.CGROUP or appgroup.ENVIRONMENT
        self._wake_r, wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(wake_w, False)
        self.sel = selectors.DefaultSelector()  # the wakeup pipe and the replicas' pipes
        self.sel.register(self._wake_r, selectors.EVENT_READ, None)
        self.last_sample = 0.0
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, REQUEUE_SIGNAL):
            # a no-op handler (not SIG_IGN, which children would inherit): the wakeup pipe
            # carries the signal number to the main loop
            signal.signal(sig, lambda *_: None)

    @functools.cached_property
    def watchdog(self) -> Watchdog:
        """Hang detection (hang_timeout/on_hang options), made at its first look."""
        from trainlaunch.schedulers.local.watchdog import watchdog

        return watchdog(self)

    # -- records -----------------------------------------------------------------------------

    def save(self, final: bool = False) -> None:
        """Write state.json atomically.

        On a full disk (ENOSPC) a transition that cannot be recorded does not stop the app:
        the next save tries again, and the final one spends the space the CLI reserved.
        """
        path = self.app_dir / "state.json"
        if final and _disk_full(self.app_dir):
            self.store_problem = STORE_FULL
        lost = self.lost_total()
        try:
            store.write_json(path, self._record())
            self.saved_lost = lost
        except StoreError as e:
            if e.errno != errno.ENOSPC:
                raise
            self.store_problem = STORE_FULL
            _note(f"{e.message}; the app goes on")
            if not final:
                return
            if not store.release_reserve(self.app_dir):
                raise
            store.write_json(path, self._record())  # into the space held back for it
            self.saved_lost = lost
        if final:
            store.release_reserve(self.app_dir)
            _wake_waiter(self.waiter)

    def lost_total(self) -> int:
        """Output bytes a full disk cost the logs so far (every replica, every file)."""
        return sum(sum(r.lost_bytes().values()) for r in self.replicas)

    def _record(self) -> dict[str, Any]:
        msg = self.msg
        lost = {r.key: r.lost_bytes() for r in self.replicas}
        note = ""
        if any(any(v.values()) for v in lost.values()):  # said while it runs, too
            note = _loss_note({k: v for k, v in lost.items() if any(v.values())})
        elif self.store_problem and self.ended is not None:
            note = f"{self.store_problem}: logs may be cut short"
        if note:
            msg = f"{msg}; {note}" if msg else note
        if self.strays:
            note = appgroup.said(self.strays, self.strays_found_by)
            msg = f"{msg}; {note}" if msg else note
        return {
            "version": store.RECORD_VERSION,
            "state": self.state,
            "msg": msg,
            # copied from the request: the final record names its app on its own
            "name": self.request["app"]["name"],
            "created": self.request.get("created"),
            "num_restarts": self.num_restarts,
            "num_requeues": self.num_requeues,
            "attempts": self.attempts,
            "exit_code": self.exit_code,
            "structured_error_msg": self.structured_error_msg,
            "failure": self.failure.to_dict() if self.failure else None,
            "started": self.started,
            "ended": self.ended,
            "supervisor": {
                "pid": os.getpid(),
                "ticks": processes.start_ticks(os.getpid()),
                "boot_id": processes.boot_id(),
            },
            "replicas": [r.record() for r in self.replicas],
            "cgroup": self.cgroup,  # stop finds the app's processes there if this one dies
            "strays": {"count": self.strays, "found_by": self.strays_found_by or None},
        }

    # -- processes ---------------------------------------------------------------------------

    def start(self, rep: Replica) -> None:
        """Start one replica in its own process group, its pipes read into its log files."""
        env = dict(os.environ)
        env.update(rep.plan["env"])
        env.setdefault("TORCHELASTIC_ERROR_FILE", str(rep.log_dir / "error.json"))
        env.setdefault(settings.REPLICA_LOG_DIR, str(rep.log_dir))
        env[settings.RESTART_COUNT] = str(rep.restarts)
        self.drain(rep)  # a restart: the previous run's last lines first
        try:
            rep.log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            _remove(rep.log_dir / "error.json")  # a stale reply file must not explain a new failure
            combined, out, err = open_logs(str(rep.log_dir))
        except OSError as e:  # e.g. a full disk: this replica fails, the supervisor goes on
            rep.state, rep.ended, rep.started = "FAILED", time.time(), time.time()
            rep.exit_code = 1
            rep.message = f"cannot create the log files of {rep.key}: {e.strerror or e}"
            self.exec_failed.append(rep)
            return
        rep.combined = Combined(combined)
        rep.stderr_offset = os.fstat(err).st_size
        rep.sample_timeline()
        rep.exit_code, rep.signal, rep.message, rep.ended = None, None, "", None
        rep.failure, rep.peak_rss = None, None
        rep.started = time.time()
        (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
        try:
            proc = subprocess.Popen(
                rep.plan["cmd"],
                env=env,
                cwd=rep.plan["cwd"],
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                start_new_session=True,
                close_fds=True,
                umask=USER_UMASK,
            )
        except OSError as e:
            rep.state, rep.ended = "FAILED", time.time()
            rep.exit_code = 127 if isinstance(e, FileNotFoundError) else 126
            rep.message = f"cannot execute {rep.plan['cmd'][0]!r}: {e.strerror or e}"
            line = f"trainlaunch: {rep.message}\n".encode()
            write_all(err, line)
            rep.combined.feed(2, line)
            for fd in (out_r, err_r, out, err):
                os.close(fd)
            rep.combined.close()
            self.exec_failed.append(rep)
            return
        finally:
            os.close(out_w)
            os.close(err_w)
        rep.pumps = [Pump(out_r, out, rep.combined, 1), Pump(err_r, err, rep.combined, 2)]
        for pump in rep.pumps:
            self.sel.register(pump.fd, selectors.EVENT_READ, pump)
        proc.returncode = 0  # reaped by waitpid(-1) below, never by Popen
        rep.pid, rep.ticks, rep.state = proc.pid, processes.start_ticks(proc.pid), "RUNNING"
        self.by_pid[proc.pid] = rep

    def drain(self, rep: Replica) -> None:
        """Copy what a replica's pipes hold into its files and close them (it has ended)."""
        for pump in rep.pumps:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(pump.fd)
            pump.close()
        if rep.combined is not None:
            rep.combined.close()
        rep.lost = rep.lost_bytes()  # this run's losses, before its pipes are let go
        rep.pumps, rep.combined = [], None

    def reap(self) -> list[Replica]:
        """Collect every exited child; return the replicas that ended."""
        ended = []
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            rep = self.by_pid.pop(pid, None)
            if rep is None:
                continue
            killpg(pid, signal.SIGKILL)  # stragglers the replica left in its group
            self.drain(rep)  # its files are complete before anyone is told it ended
            rep.ended = time.time()
            code = os.waitstatus_to_exitcode(status)  # -N: killed by signal N
            rep.signal, rep.exit_code = signal_name(code, returncode=True), shell_code(code)
            rep.peak_rss = usage.ru_maxrss * 1024  # ru_maxrss is in KiB on Linux
            rep.state = "SUCCEEDED" if rep.exit_code == 0 else "FAILED"
            rep.sample_timeline()
            if rep.state == "FAILED":
                rep.message = self.root_cause(rep)  # its agent's diagnosis, if it wrote one
                if rep.failure is None and pid not in self.stopping:  # not one we stopped
                    rep.failure = self.diagnose(rep, code)
            ended.append(rep)
        return ended

    def wait_signals(self, timeout: float | None) -> set[int]:
        """Block until a signal or output arrives (or timeout); return the signal numbers seen."""
        with contextlib.suppress(InterruptedError):
            for key, _ in self.sel.select(timeout):
                pump = key.data
                if pump is not None and not pump.read():
                    self.sel.unregister(pump.fd)  # EOF, or a log that cannot be written
                    pump.close()
        seen: set[int] = set()
        while True:
            try:
                data = os.read(self._wake_r, 512)
            except BlockingIOError:
                break
            if not data:
                break
            seen.update(data)
        if seen & set(_STOP_SIGNALS) and not self.stop_requested:
            self.stop_requested = True  # SIGTERM (`trainlaunch stop`) wins over a SIGINT with it
            self.stop_signal = signal.SIGTERM if signal.SIGTERM in seen else signal.SIGINT
        if REQUEUE_SIGNAL in seen:
            self.requeue_requested = True
        return seen

    def terminate(self, reps: list[Replica], final_state: str, sig: int = signal.SIGTERM) -> None:
        """SIGTERM the running replicas, wait for the grace period, then SIGKILL (sig SIGINT:
        an interrupt's SIGINT, grace period and SIGTERM come first: interrupt)."""
        running = [r for r in reps if r.pid in self.by_pid]
        self.stopping.update(r.pid for r in running if r.pid is not None)
        pids = [r.pid for r in running if r.pid is not None]
        grace = self.grace
        if sig == signal.SIGINT:
            pids, sig, grace = self.interrupt(running), signal.SIGKILL, 0.0
        processes.stop_with_grace(
            pids,
            grace,
            sig=sig,
            alive=self.by_pid.__contains__,  # not reaped yet
            wait=self._wait_reaping,
            kill_wait=math.inf,  # a SIGKILLed child ends: the final record waits for it
        )
        for r in running:
            r.state = final_state
        for r in reps:
            if r.state in ("PENDING", "RUNNING"):
                r.state = final_state

    def interrupt(self, running: list[Replica]) -> list[int]:
        """Ctrl-C's stop, as torchrun passes it on: SIGINT to every replica, the grace period,
        then SIGTERM to those still running, a few seconds more; the pids still running.
        A node agent gets a second SIGINT instead of that SIGTERM (which it ignores while its
        workers have their SIGINT): as Ctrl-C twice, it moves on to SIGTERM its workers."""
        agents = {r.pid for r in running if r.plan.get("node_agent")}

        def send(pid: int, sig: int) -> None:
            killpg(pid, signal.SIGINT if sig == signal.SIGTERM and pid in agents else sig)

        term = processes.interrupt_term_wait(self.grace)
        left = processes.stop_with_grace(
            [r.pid for r in running if r.pid is not None],
            self.grace,
            sig=signal.SIGINT,
            send=send,
            alive=self.by_pid.__contains__,
            wait=self._wait_reaping,
            kill_sig=signal.SIGTERM,
            kill_wait=term,
        )
        if left:
            _note(f"{len(left)} replica(s) still running {term:g}s after SIGTERM: SIGKILL")
        return left

    def _wait_reaping(self, seconds: float) -> None:
        """Read the pipes until a signal (SIGCHLD) or seconds pass, then reap."""
        self.wait_signals(min(seconds, 0.5))
        self.reap()

    # -- policy ------------------------------------------------------------------------------

    def on_failure(self, rep: Replica) -> bool:
        """Apply the retry policy to a failed replica; True if something was restarted."""
        policy = self.policy.get(rep.role, "APPLICATION")
        limit = self.max_retries.get(rep.role, 0)
        if policy == "REPLICA" and rep.restarts < limit:
            rep.restarts += 1
            self.start(rep)
            return True
        if policy == "ROLE" and self.role_restarts.get(rep.role, 0) < limit:
            self.role_restarts[rep.role] = self.role_restarts.get(rep.role, 0) + 1
            group = [r for r in self.replicas if r.role == rep.role]
            self.terminate(group, "CANCELLED")
            for r in group:
                r.restarts += 1
                self.start(r)
            return True
        if policy == "APPLICATION" and self.num_restarts < limit:
            self.num_restarts += 1
            self.terminate(self.replicas, "CANCELLED")
            self.stop_strays()
            self.end_attempt("failed", rep.exit_code)
            self.restart_all()
            return True
        return False

    # -- attempts and requeues ---------------------------------------------------------------

    def begin_attempt(self) -> None:
        """Open the next attempt in the history."""
        self.witness.attempt_started()
        self.attempts.append({"attempt": len(self.attempts), "start": time.time(), "end": None})

    def end_attempt(self, reason: str, exit_code: int | None = None) -> None:
        """Close the current attempt with why it ended."""
        if self.attempts and self.attempts[-1].get("end") is None:
            self.attempts[-1].update(reason=reason, end=time.time(), exit_code=exit_code)

    def restart_all(self) -> None:
        """Start every replica again as a new attempt (the app-wide restart count grows)."""
        self.begin_attempt()
        for r in self.replicas:
            r.restarts += 1
            self.start(r)
        self.save()

    def stop_strays(self) -> None:
        """Stop what the app left running outside its process groups (a `setsid` daemon):
        the members of its cgroup, else the processes that carry its TRAINLAUNCH_APP_ID."""
        pids, how = appgroup.stray(self.request["app_id"], self.cgroup)
        groups = [r.pid for r in self.replicas if r.pid] + worker_groups(self.app_dir, False)
        left = appgroup.left_groups(pids, groups)  # the rest were dying with their group
        appgroup.stop_strays(pids, self.grace)
        if left:
            self.strays += left
            self.strays_found_by = how
            _note(f"stopped {left} process(es) that left the app's process group ({how})")

    def requeue(self, reason: str, exit_code: int | None = None) -> bool:
        """Stop every replica (grace period), then run the app again if requeues are left."""
        self.terminate(self.replicas, "CANCELLED")
        self.stop_strays()
        self.end_attempt(reason, exit_code)
        if self.num_requeues >= self.max_requeues:
            return False
        self.num_requeues += 1
        self.restart_all()
        return True

    def root_cause(self, rep: Replica) -> str:
        """The reply file's headline and traceback if the replica wrote one (a node agent
        does: host, rank, the exception line, the peers it stopped, why), else its stderr tail.
        """
        how = f"killed by {rep.signal}" if rep.signal else f"exited with code {rep.exit_code}"
        try:
            reply = store.read_json_or_none(rep.log_dir / "error.json")
        except (StoreError, OSError):
            reply = None  # a torn or odd reply file must not hide the failure itself
        if isinstance(reply, dict):
            from trainlaunch.diagnosis.values import Diagnosis  # on a failure only

            self.structured_error_msg = self.structured_error_msg or json.dumps(reply)
            rep.failure = Diagnosis.from_dict(reply.get("diagnosis"))
            msg = reply.get("message")
            detail, headline = "", ""
            if isinstance(msg, dict):
                extra = msg.get("extraInfo") or {}
                headline = str(msg.get("message") or "")
                detail = extra.get("py_callstack") or headline
            elif isinstance(msg, str):
                detail = msg
            if reply.get("signal"):  # the agent exits 128+N for its rank's signal N: name it
                how = f"killed by {reply['signal']}"
            if detail:
                return _headline(rep.key, how, reply, headline) + "\n" + detail.rstrip()
        tail = _tail(rep.log_dir / "stderr.log", rep.stderr_offset, STDERR_TAIL_LINES)
        return f"{rep.key} {how}" + (f"; last stderr lines:\n{tail}" if tail else "")

    def diagnose(self, rep: Replica, code: int) -> diagnoses.Diagnosis:
        """Why a replica that is not a node agent failed (one rank: its plan index)."""
        rank = next(i for i, r in enumerate(self.replicas) if r is rep)
        stderr = _tail(rep.log_dir / "stderr.log", rep.stderr_offset, 1 << 20, 8 << 20)
        sent_by = "trainlaunch stop" if self.stop_requested else ""
        return self.witness.diagnose(rank, code, rep.pid or 0, stderr, rep.peak_rss, None, sent_by)

    def _failure_of(self, rep: Replica) -> diagnoses.Diagnosis | None:
        """Its failure, or a rank's of a node agent this supervisor stopped (fallout)."""
        if rep.failure is not None or not rep.plan.get("node_agent"):
            return rep.failure
        from trainlaunch.node.agent_record import read_agent_state
        from trainlaunch.node.witness import stopped_node_failure

        return stopped_node_failure(read_agent_state(str(rep.log_dir)))

    def app_failure(self, first: Replica) -> diagnoses.Diagnosis | None:
        """The app's diagnosis from every replica's, the first to fail leading."""
        from trainlaunch.diagnosis.app import NodeOutcome, explain_app

        order = [
            first,
            *sorted((r for r in self.replicas if r is not first), key=lambda r: r.ended or 0),
        ]
        # a replica stopped meanwhile (CANCELLED) may have failed on its own first: its
        # failure counts (fallout, or the cause when the first to fail was the fallout)
        nodes = [NodeOutcome(r.key, self._failure_of(r), r.started is not None) for r in order]
        return explain_app(nodes)

    # -- main loop ---------------------------------------------------------------------------

    def may_start(self) -> str:
        """Why the app must not start ('' if it may): a stop that came while it was handed a
        slot, or its group stopped (queue.py). An app of a slot group needs its slot."""
        spec = self.request.get("slots")
        if (self.app_dir / queue.STOP_REQUEST).exists():
            return "stopped on request before it started"
        if not spec:
            return ""
        if queue.is_closed(spec):
            return queue.GROUP_STOPPED
        if self.slot_fd is None:  # every starter passes one (launch.SLOT_FD): take a free one
            self.slot_fd = slots.try_acquire(spec)
            if self.slot_fd is None:
                return f"started without a slot of group {Path(spec['dir']).name}, none free"
        return ""

    def run(self) -> int:
        """Run the app to its end; return 0 (the outcome is in state.json)."""
        why = self.may_start()
        if why or self.stop_requested:
            self.state, self.ended = "CANCELLED", time.time()
            self.msg = why or "stopped on request before it started"
            self.terminate(self.replicas, "CANCELLED")
            self.save(final=True)
            return 0
        self.state = "RUNNING"  # replicas are being started: each says PENDING until it runs
        if self.cgroup is None:  # before any replica: all in it
            self.cgroup = appgroup.enter(self.request["app_id"])
        self.begin_attempt()
        self.save()
        for rep in self.replicas:
            if not self.stop_requested:
                self.start(rep)
        self.save()
        give_up: Replica | None = None
        while True:
            if self.stop_requested:
                self.terminate(self.replicas, "CANCELLED", self.stop_signal)
                self.state, self.msg = "CANCELLED", "stopped on request"
                from trainlaunch.diagnosis.values import STOPPED, Diagnosis

                self.failure = Diagnosis(STOPPED, self.stopped_how())
                if self.stop_signal == signal.SIGINT:
                    self.msg = "interrupted (Ctrl-C)"
                break
            if self.requeue_requested:
                self.requeue_requested = False
                if not self.requeue("preempted (stop --requeue)"):
                    self.state = "FAILED"
                    self.msg = f"preempted; no requeues left (max_requeues={self.max_requeues})"
                    break
                continue
            ended = self.reap() + self._exec_failures()
            asked = [r for r in ended if r.exit_code == settings.REQUEUE_EXIT_CODE]
            if asked and self.num_requeues < self.max_requeues:
                self.requeue(f"requeue requested by {asked[0].key}", settings.REQUEUE_EXIT_CODE)
                continue
            for rep in sorted(ended, key=lambda r: r.ended or 0):
                # an app/role restart earlier in this batch may have restarted rep already
                if (
                    rep.state == "FAILED"
                    and rep.pid not in self.by_pid
                    and not self.on_failure(rep)
                ):
                    give_up = rep
                    break
            if give_up is not None:
                self.terminate([r for r in self.replicas if r is not give_up], "CANCELLED")
                self.state = "FAILED"
                self.exit_code = give_up.exit_code
                self.msg = give_up.message.splitlines()[0] if give_up.message else ""
                self.failure = self.app_failure(give_up)
                break
            if all(r.state == "SUCCEEDED" for r in self.replicas):
                self.state = "SUCCEEDED"
                break
            if ended:
                self.save()
            if not self._exec_failures(peek=True):
                self.wait_signals(TIMELINE_INTERVAL_S)
                # output wakes the loop too: sample and check for hangs once per interval
                if time.monotonic() - self.last_sample >= TIMELINE_INTERVAL_S:
                    self.last_sample = time.monotonic()
                    self.sample_timelines()
                    if self.lost_total() != self.saved_lost:  # status says how much, and grows
                        self.save()
                    hang = self.watchdog.tick()
                    if hang is not None and hang.stopped:  # on_hang=stop, or no restart left
                        break  # the watchdog stopped the replicas: the app ended FAILED
        for rep in self.replicas:
            self.drain(rep)
        self.stop_strays()  # the app has ended: nothing it started outlives it (issue 23 #9)
        self.end_attempt(self.state.lower(), self.exit_code)
        self.ended = time.time()
        self.save(final=True)
        return 0

    def stopped_how(self) -> str:
        """The stopped app's failure line: which signals went to the replicas, when."""
        if self.stop_signal == signal.SIGINT:
            term = processes.interrupt_term_wait(self.grace)
            return (
                f"interrupted by Ctrl-C (SIGINT to every replica, SIGTERM after {self.grace:g}s, "
                f"SIGKILL {term:g}s later)"
            )
        return (
            f"stopped by `trainlaunch stop` (SIGTERM to every replica, SIGKILL after "
            f"{self.grace:g}s)"
        )

    def sample_timelines(self) -> None:
        """Record log sizes of the running replicas (see Replica.sample_timeline)."""
        for rep in self.by_pid.values():
            rep.sample_timeline()

    def _exec_failures(self, peek: bool = False) -> list[Replica]:
        """Replicas whose last start failed before a process existed (not yet handled)."""
        out = self.exec_failed
        if not peek:
            self.exec_failed = []
        return out


def _loss_note(lost: dict[str, dict[str, int]]) -> str:
    """``output lost while the app store was full: 1.5 MiB (train/0: stdout.log 1.0 MiB, ...)``"""
    total = sum(sum(v.values()) for v in lost.values())
    parts = [
        f"{key}: " + ", ".join(f"{name} {_size(n)}" for name, n in sorted(files.items()) if n)
        for key, files in lost.items()
    ]
    return (
        f"output lost while the app store was full: {_size(total)} ({'; '.join(parts)}); "
        "the logs mark where"
    )


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def _disk_full(path: Path) -> bool:
    try:
        return os.statvfs(path).f_bavail == 0
    except OSError:
        return False


def _wake_waiter(pid: int) -> None:
    """SIGCHLD to the process that started this one while it still is its parent: `run --wait`
    naps until a child of it exits (runner/polling.py), so the final record is seen now, not
    after the cgroup is removed and this process has exited (~15 ms later). To any other
    starter (a supervisor handing on its slot, a `status` that kicked a queue) a SIGCHLD
    only means a look at its children."""
    if pid > 1 and os.getppid() == pid:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCHLD)


def _note(text: str) -> None:
    """A line in supervisor.log (best effort: that file may be on the full disk too)."""
    with contextlib.suppress(OSError):
        os.write(2, f"trainlaunch supervisor: {text}\n".encode())


def _headline(key: str, how: str, reply: dict[str, Any], message: str) -> str:
    """``train/0 (rank 1, local_rank 1, host n1) exited with code 1: ValueError: boom``, and
    the peers its agent stopped because of it."""
    where = ""
    if "rank" in reply:
        parts = [f"rank {reply['rank']}"]
        parts += [f"local_rank {reply['local_rank']}"] if "local_rank" in reply else []
        parts += [f"host {reply['hostname']}"] if reply.get("hostname") else []
        where = f" ({', '.join(parts)})"
    said = message and not message.startswith(("exited with code", "Signal "))
    line = f"{key}{where} {how}" + (f": {message}" if said else "")
    stopped = reply.get("stopped")
    if isinstance(stopped, list) and stopped and all(isinstance(r, int) for r in stopped):
        from trainlaunch.ranklist import rank_list

        who = ("rank " if len(stopped) == 1 else "ranks ") + rank_list(stopped)
        line += f"; {who} stopped because of it"
    return line


def _tail(path: Path, offset: int, n: int, window: int = 16384) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            start = max(offset, size - window)
            f.seek(start)
            data = f.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", errors="replace").splitlines()
    return "\n".join(lines[-n:])


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def main(argv: list[str]) -> int:
    """Entry point: supervise the app whose directory is argv[1] (``--slot-fd N``: the
    inherited, locked slot of its group, handed on to the next queued app at the end;
    ``--app-from-fd N`` instead of the directory: a warm supervisor, launch.py)."""
    # everything the supervisor creates in the store is private; replicas get the user's umask
    global USER_UMASK
    USER_UMASK = keep_files_private()
    cgroup = None
    if len(argv) == 3 and argv[1] == APP_FROM_FD and argv[2].isdigit():
        # while the CLI builds the app: the cgroup its replicas will start in (a cgroup move
        # waits for the kernel, ~10 ms), named before the app exists
        cgroup = appgroup.enter(appgroup.supervisor_name(os.getpid()))
        try:
            path = await_app(int(argv[2]))
        except BaseException:
            appgroup.leave(cgroup)
            raise
        if not path:
            appgroup.leave(cgroup)
            return 0  # the CLI had no app for it
        argv = [argv[0], path]
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != SLOT_FD):
        print(
            f"usage: python -m trainlaunch.schedulers.local.supervisor APP_DIR [{SLOT_FD} N]",
            file=sys.stderr,
        )
        return 2
    slot_fd = int(argv[3]) if len(argv) == 4 else None
    try:
        sup = Supervisor(Path(argv[1]))
    except BaseException:
        appgroup.leave(cgroup)
        _hand_on(None, slot_fd)
        raise
    sup.slot_fd = slot_fd
    sup.cgroup = cgroup  # a warm supervisor's, else run() makes the app's
    try:
        return sup.run()
    except BaseException as e:  # record the crash instead of leaving a stale RUNNING
        sup.state, sup.msg, sup.ended = "FAILED", f"supervisor crashed: {e!r}", time.time()
        try:
            sup.terminate(sup.replicas, "CANCELLED")
            sup.stop_strays()
            sup.save(final=True)
        except Exception:  # noqa: BLE001 - best effort while already failing
            pass
        raise
    finally:
        appgroup.leave(sup.cgroup)  # before the slot starts another app's supervisor
        _hand_on(sup.request.get("slots"), sup.slot_fd)


def _hand_on(spec: Any, slot_fd: int | None) -> None:
    """The app has ended: its slot starts the group's next queued app (queue.py)."""
    if slot_fd is None:
        return
    if not isinstance(spec, dict):
        os.close(slot_fd)
        return
    try:
        if not queue.hand_off(spec, slot_fd):
            queue.kick(spec)
    except Exception as e:  # noqa: BLE001 - the app's record is final; the next command kicks
        _note(f"could not hand the slot on: {e!r}")


if __name__ == "__main__":
    processes.exit_at_once(main(sys.argv))


__all__ = ["Supervisor", "main"]
