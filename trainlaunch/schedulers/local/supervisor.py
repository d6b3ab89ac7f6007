"""The detached, torch-free process that owns one local app.

Started as ``python -m trainlaunch.schedulers.local.supervisor <app_dir>`` in its own session, it
starts every replica as its own process group, reads its stdout and stderr pipes into
``stdout.log``, ``stderr.log`` and ``combined.log`` (both streams in arrival order, see
interleave.py), reaps them, applies the retry policy, and records every transition
atomically in ``state.json``. Like torchrun's agent, it is the replicas' reader: a replica
that writes after this process was SIGKILLed gets EPIPE (the app is then reported as lost).
SIGTERM/SIGINT stop the app: SIGTERM to every group,
the grace period, then SIGKILL. SIGUSR1 (``stop --requeue``) does the same and then starts
the app again, a *requeue*, as does a replica that exits with the requeue code (75); requeues
count up to ``max_requeues``, apart from failures. Every run of the whole app is an attempt
in ``state.json`` (reason, start, end). Signals are handled synchronously through a wakeup pipe.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from trainlaunch import settings, store
from trainlaunch.errors import StoreError
from trainlaunch.interleave import Combined, Pump, open_logs, write_all
from trainlaunch.procs import keep_files_private, killpg
from trainlaunch.schedulers.local import slots
from trainlaunch.schedulers.local.watchdog import Watchdog

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
        self.watchdog = Watchdog(self)  # hang detection (hang_timeout/on_hang options)
        self.store_problem = ""  # e.g. the disk filled up: said in the final record's msg
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

    # -- records -----------------------------------------------------------------------------

    def save(self, final: bool = False) -> None:
        """Write state.json atomically.

        On a full disk (ENOSPC) a transition that cannot be recorded does not stop the app:
        the next save tries again, and the final one spends the space the CLI reserved.
        """
        path = self.app_dir / "state.json"
        if final and _disk_full(self.app_dir):
            self.store_problem = STORE_FULL
        try:
            store.write_json(path, self._record())
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
        if final:
            store.release_reserve(self.app_dir)

    def _record(self) -> dict[str, Any]:
        msg = self.msg
        if self.store_problem and self.ended is not None:
            note = f"{self.store_problem}: logs may be cut short"
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
            "started": self.started,
            "ended": self.ended,
            "supervisor": {
                "pid": os.getpid(),
                "ticks": store.start_ticks(os.getpid()),
                "boot_id": store.boot_id(),
            },
            "replicas": [r.record() for r in self.replicas],
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
        rep.pid, rep.ticks, rep.state = proc.pid, store.start_ticks(proc.pid), "RUNNING"
        self.by_pid[proc.pid] = rep

    def drain(self, rep: Replica) -> None:
        """Copy what a replica's pipes hold into its files and close them (it has ended)."""
        for pump in rep.pumps:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(pump.fd)
            pump.close()
        rep.pumps = []
        if rep.combined is not None:
            rep.combined.close()
            rep.combined = None

    def reap(self) -> list[Replica]:
        """Collect every exited child; return the replicas that ended."""
        ended = []
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
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
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                rep.signal = _signal_name(sig)
                rep.exit_code = 128 + sig
            else:
                rep.exit_code = os.WEXITSTATUS(status)
            rep.state = "SUCCEEDED" if rep.exit_code == 0 else "FAILED"
            rep.sample_timeline()
            if rep.state == "FAILED":
                rep.message = self.root_cause(rep)
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
        if seen & set(_STOP_SIGNALS):
            self.stop_requested = True
        if REQUEUE_SIGNAL in seen:
            self.requeue_requested = True
        return seen

    def terminate(self, reps: list[Replica], final_state: str) -> None:
        """SIGTERM the running replicas, wait for the grace period, then SIGKILL."""
        running = [r for r in reps if r.pid in self.by_pid]
        for r in running:
            killpg(r.pid, signal.SIGTERM)  # type: ignore[arg-type]
        deadline = time.monotonic() + self.grace
        while any(r.pid in self.by_pid for r in running):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.reap()
            if any(r.pid in self.by_pid for r in running):
                self.wait_signals(min(left, 0.5))
        for r in running:
            if r.pid in self.by_pid:
                killpg(r.pid, signal.SIGKILL)  # type: ignore[arg-type]
        while any(r.pid in self.by_pid for r in running):
            self.reap()
            if any(r.pid in self.by_pid for r in running):
                self.wait_signals(0.1)
        for r in running:
            r.state = final_state
        for r in reps:
            if r.state in ("PENDING", "RUNNING"):
                r.state = final_state

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
            self.end_attempt("failed", rep.exit_code)
            self.restart_all()
            return True
        return False

    # -- attempts and requeues ---------------------------------------------------------------

    def begin_attempt(self) -> None:
        """Open the next attempt in the history."""
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

    def requeue(self, reason: str, exit_code: int | None = None) -> bool:
        """Stop every replica (grace period), then run the app again if requeues are left."""
        self.terminate(self.replicas, "CANCELLED")
        self.end_attempt(reason, exit_code)
        if self.num_requeues >= self.max_requeues:
            return False
        self.num_requeues += 1
        self.restart_all()
        return True

    def root_cause(self, rep: Replica) -> str:
        """The reply file's traceback if the replica wrote one, else its stderr tail."""
        how = f"killed by {rep.signal}" if rep.signal else f"exited with code {rep.exit_code}"
        try:
            reply = store.read_json_or_none(rep.log_dir / "error.json")
        except (StoreError, OSError):
            reply = None  # a torn or odd reply file must not hide the failure itself
        if isinstance(reply, dict):
            self.structured_error_msg = self.structured_error_msg or json.dumps(reply)
            msg = reply.get("message")
            detail = ""
            if isinstance(msg, dict):
                extra = msg.get("extraInfo") or {}
                detail = extra.get("py_callstack") or msg.get("message") or ""
            elif isinstance(msg, str):
                detail = msg
            where = ""
            if "rank" in reply:
                where = f" (rank {reply['rank']}"
                where += f", local_rank {reply['local_rank']})" if "local_rank" in reply else ")"
            if detail:
                return f"{rep.key}{where} {how}\n{detail.rstrip()}"
        tail = _tail(rep.log_dir / "stderr.log", rep.stderr_offset, STDERR_TAIL_LINES)
        return f"{rep.key} {how}" + (f"; last stderr lines:\n{tail}" if tail else "")

    # -- main loop ---------------------------------------------------------------------------

    def wait_for_slot(self) -> bool:
        """A sweep point waits (PENDING) for a slot of its sweep; False if stopped first."""
        spec = self.request.get("slots")
        if not spec:
            return True
        self.msg = f"waiting for a free sweep slot (max_parallel {spec['count']})"
        self.save()
        while (fd := slots.try_acquire(spec)) is None:
            self.wait_signals(slots.POLL_S)
            if self.stop_requested:
                return False
        self._slot_fd = fd  # held until this process exits (docs/sweeps.md)
        self.msg, self.started = "", time.time()
        return True

    def run(self) -> int:
        """Run the app to its end; return 0 (the outcome is in state.json)."""
        if not self.wait_for_slot():
            self.terminate(self.replicas, "CANCELLED")
            self.state, self.msg, self.ended = "CANCELLED", "stopped on request", time.time()
            self.save()
            return 0
        self.state = "RUNNING"  # replicas are being started: each says PENDING until it runs
        self.begin_attempt()
        self.save()
        for rep in self.replicas:
            if not self.stop_requested:
                self.start(rep)
        self.save()
        give_up: Replica | None = None
        while True:
            if self.stop_requested:
                self.terminate(self.replicas, "CANCELLED")
                self.state, self.msg = "CANCELLED", "stopped on request"
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
                    if self.watchdog.tick():  # a hang with on_hang=stop (or no restart left)
                        self.terminate(self.replicas, "CANCELLED")
                        self.state, self.msg = "FAILED", self.watchdog.message
                        break
        for rep in self.replicas:
            self.drain(rep)
        self.end_attempt(self.state.lower(), self.exit_code)
        self.ended = time.time()
        self.save(final=True)
        return 0

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


def _disk_full(path: Path) -> bool:
    try:
        return os.statvfs(path).f_bavail == 0
    except OSError:
        return False


def _note(text: str) -> None:
    """A line in supervisor.log (best effort: that file may be on the full disk too)."""
    with contextlib.suppress(OSError):
        os.write(2, f"trainlaunch supervisor: {text}\n".encode())


def _tail(path: Path, offset: int, n: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            start = max(offset, size - 16384)
            f.seek(start)
            data = f.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", errors="replace").splitlines()
    return "\n".join(lines[-n:])


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def main(argv: list[str]) -> int:
    """Entry point: supervise the app whose directory is argv[1]."""
    if len(argv) != 2:
        print("usage: python -m trainlaunch.schedulers.local.supervisor APP_DIR", file=sys.stderr)
        return 2
    # everything the supervisor creates in the store is private; replicas get the user's umask
    global USER_UMASK
    USER_UMASK = keep_files_private()
    sup = Supervisor(Path(argv[1]))
    try:
        return sup.run()
    except BaseException as e:  # record the crash instead of leaving a stale RUNNING
        sup.state, sup.msg, sup.ended = "FAILED", f"supervisor crashed: {e!r}", time.time()
        try:
            sup.terminate(sup.replicas, "CANCELLED")
            sup.save(final=True)
        except Exception:  # noqa: BLE001 - best effort while already failing
            pass
        raise


if __name__ == "__main__":
    sys.exit(main(sys.argv))


__all__ = ["Supervisor", "main"]
