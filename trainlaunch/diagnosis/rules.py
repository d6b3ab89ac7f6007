"""One failed rank explained: the rules, most specific first (pure).

The facts come from whoever saw the rank die (the node agent, the local supervisor) in a
:class:`RankEnd`; :func:`explain` returns the first rule that matches, so an OOM kill is not
reported as "killed by SIGKILL" and a CUDA out-of-memory is not just "raised RuntimeError".
"""

from __future__ import annotations

import dataclasses
import re
import signal
from collections.abc import Mapping

from trainlaunch.diagnosis import values as v
from trainlaunch.diagnosis.traceback import Traceback, last_traceback, strip_prefix
from trainlaunch.diagnosis.values import Diagnosis, human_bytes
from trainlaunch.ranklist import rank_list
from trainlaunch.values import frozen

_IN_USE = re.compile(r"EADDRINUSE|[Aa]ddress already in use|Errno 98")
_PORT = re.compile(r"\bport[:= ]\s*(\d{1,5})\b|:(\d{2,5})\b")
_JOINED = re.compile(r"(\d+)/(\d+) clients joined")
_RDZV = re.compile(
    r"DistStoreError|Timed out after \d+ seconds waiting for clients|timed out waiting for"
    r" (?:clients|peers|workers)|RendezvousTimeoutError|waiting for key\(s\)|Wait timeout",
    re.IGNORECASE,
)
_FALLOUT = tuple(  # most telling first: the phrase the line quotes
    re.compile(p, re.IGNORECASE)
    for p in (
        r"Connection closed by peer",
        r"Connection reset by peer",
        r"NCCL communicator was aborted",
        r"Watchdog caught collective operation timeout",
        r"Timed out waiting \d+ms for recv",
        r"Socket Timeout",
        r"Broken pipe",
        r"heartbeat timeout",
        r"DistNetworkError",
        r"gloo/transport/\w+/pair\.cc",
    )
)
_CUDA_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError")
_ALLOC = re.compile(r"Tried to allocate ([\d.]+ [KMGT]?i?B)")
_HOST_ALLOC = re.compile(
    r"can't allocate memory: you tried to allocate (\d+) bytes|DefaultCPUAllocator|"
    r"^MemoryError|Cannot allocate memory",
    re.M,
)
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}


@frozen
class RankEnd:
    """What is known of one rank that ended badly (all optional but the exit code)."""

    rank: int
    exit_code: int  # Popen's convention: -N when killed by signal N
    host: str = ""
    node_rank: int | None = None
    pid: int = 0
    nproc: int | None = None  # ranks per node (to name the nodes a rendezvous missed)
    nnodes: int | None = None
    stderr: str = ""  # the end of its stderr (the traceback is searched in all of it)
    peak_rss: int | None = None  # bytes: the most it used (wait4's ru_maxrss)
    memory_limit: int | None = None  # bytes: the limit it ran under
    limit_where: str = ""  # "the cgroup /sys/fs/cgroup/...", "the node's memory"
    oom_kills: int | None = None  # the OOM killer's kills in its cgroup during the attempt
    cgroup: str = ""  # which cgroup that count is from
    kernel: tuple[str, ...] = ()  # the kernel log's OOM lines about its pid
    kernel_note: str = ""  # why the kernel log could not be read
    shm: tuple[int, int] | None = None  # /dev/shm (size, free)
    port_holders: Mapping[int, str] = dataclasses.field(default_factory=dict)
    sent_by: str = ""  # who sent it its stop signal, when trainlaunch knows ("" : not it)

    @property
    def signal(self) -> signal.Signals | None:
        """The signal it was killed by."""
        if self.exit_code >= 0:
            return None
        try:
            return signal.Signals(-self.exit_code)
        except ValueError:
            return None


def ports_named(stderr: str) -> list[int]:
    """The ports an EADDRINUSE in stderr names (whose holders the caller may look up)."""
    out: list[int] = []
    for ln in stderr.splitlines():
        if not _IN_USE.search(ln):
            continue
        m = _PORT.search(ln)
        port = int(m[1] or m[2]) if m else None
        if port is not None and port not in out:
            out.append(port)
    return out


def explain(end: RankEnd) -> Diagnosis:
    """Why this rank failed: the first rule that matches (see the module docstring)."""
    tb = last_traceback(end.stderr)
    for rule in _RULES:
        d = rule(end, tb)
        if d is not None:
            return dataclasses.replace(d, rank=end.rank, host=end.host)
    raise AssertionError("the last rule always matches")  # pragma: no cover


def _who(end: RankEnd) -> str:
    return f"rank {end.rank}"


def _oom_killed(end: RankEnd, tb: Traceback | None) -> Diagnosis | None:
    if end.signal != signal.SIGKILL or not (end.oom_kills or end.kernel):
        return None
    at = f" at {human_bytes(end.peak_rss)}" if end.peak_rss else ""
    limit = ""
    if end.memory_limit:
        limit = f" ({end.limit_where or 'limit'} {human_bytes(end.memory_limit)})"
    evidence = []
    if end.oom_kills:
        evidence.append(f"{end.cgroup or 'its cgroup'}: oom_kill +{end.oom_kills}")
    killed = [k for k in end.kernel if "Killed process" in k]
    evidence += (killed or list(end.kernel))[:1]
    if end.peak_rss:
        evidence.append(f"peak resident memory {human_bytes(end.peak_rss)} (wait4)")
    line = f"{_who(end)} was killed by the OOM killer{at}{limit}"
    return Diagnosis(v.OOM_KILLED, line, tuple(evidence))


def _cuda_oom(end: RankEnd, tb: Traceback | None) -> Diagnosis | None:
    if tb is None or not (_CUDA_OOM.search(tb.exception) or tb.short_type == "OutOfMemoryError"):
        return None
    m = _ALLOC.search(tb.exception)
    what = f": tried to allocate {m[1]}" if m else ""
    gpu = re.search(r"GPU (\d+)", tb.exception)
    on = f" on GPU {gpu[1]}" if gpu else ""
    line = f"{_who(end)} ran out of GPU memory{on}{what}"
    return Diagnosis(v.CUDA_OOM, line, _tb_evidence(tb))


def _host_alloc(end: RankEnd, tb: Traceback | None) -> Diagnosis | None:
    text = tb.exception if tb else ""
    if tb is None or not (_HOST_ALLOC.search(text) or tb.short_type == "MemoryError"):
        return None
    m = re.search(r"you tried to allocate (\d+) bytes", text)
    size = f" {human_bytes(int(m[1]))} of" if m else ""
    line = f"{_who(end)} could not allocate{size} host memory ({tb.short_type})"
    evidence = list(_tb_evidence(tb))
    if end.memory_limit:
        evidence.append(f"limit: {human_bytes(end.memory_limit)} ({end.limit_where})")
    evidence.append("an address-space limit (ulimit -v, RLIMIT_AS) refuses allocations too")
    return Diagnosis(v.HOST_ALLOC, line, tuple(evidence))


def _bus_error(end: RankEnd, tb: Traceback | None) -> Diagnosis | None:
    dataloader = tb is not None and "insufficient shared memory" in tb.exception
    if end.signal != signal.SIGBUS and not dataloader:
        return None
    how = "was killed by SIGBUS (bus error)" if end.signal else "hit a bus error in a worker"
    evidence = list(_tb_evidence(tb)) if tb else []
    why = ": shared memory is full?" if dataloader else ""
    if end.shm:
        size, free = end.shm
        shm = f"/dev/shm has {human_bytes(size)} ({human_bytes(free)} free)"
        full = free < min(size // 10, 256 << 20) or dataloader
        why = (
            f": shared memory is full ({shm})"
            if full
            else (f": a memory-mapped file shrank or shared memory went away ({shm})")
        )
        evidence.append(f"/dev/shm: {human_bytes(size)}, {human_bytes(free)} free")
    evidence.append(
        "a container's /dev/shm is small: docker run --shm-size=16g; Kubernetes: an emptyDir "
        "with medium Memory mounted on /dev/shm"
    )
    return Diagnosis(v.BUS_ERROR, f"{_who(end)} {how}{why}", tuple(evidence))


def _abort(end: RankEnd, tb: Traceback | None) -> Diagnosis | None:
    # An uncaught Python exception that torch's teardown then aborted (gloo's "terminate called
    # without an active exception") is the exception's story: the later rules tell it.
    if end.signal != signal.SIGABRT or tb is not None:
        return None
    last = _last_line(end.stderr)
    line = f"{_who(end)} aborted (SIGABRT)" + (f": {last}" if last else "")
    if TEARDOWN_ABORT in end.stderr:  # no exception: a native thread outlived the interpreter
        return Diagnosis(v.ABORT, line, TEARDOWN_EVIDENCE)
    return Diagnosis(v.ABORT, line, ("a C++ exception or assertion ended the process",))


TEARDOWN_ABORT = "terminate called without an active exception"
TEARDOWN_EVIDENCE = (
    "a native thread was still running when the interpreter exited (torch's gloo threads "
    "now and then, even after destroy_process_group)",
    "once a rank's work is saved, leave with sys.stdout.flush(); os._exit(0)",
)


def _segfault(end: RankEnd, tb: Traceback | None) -> Diagnosis | None:
    if end.signal != signal.SIGSEGV:
        return None
    frame = re.findall(r'File "([^"]+)", line (\d+)', end.stderr)
    where = f" (Python was at {frame[0][0].rsplit('/', 1)[-1]}:{frame[0][1]})" if frame else ""
    line = f"{_who(end)} crashed: segmentation fault (SIGSEGV) in native code{where}"
    return Diagnosis(v.SEGFAULT, line, tuple(x for x in (_last_line(end.stderr),) if x))


def _port_in_use(end: RankEnd, tb: Traceback | None) -> Diagnosis | None:
    if not _IN_USE.search(end.stderr):
        return None
    ports = ports_named(end.stderr)
    port = ports[0] if ports else None
    holder = end.port_holders.get(port) if port is not None else ""
    what = f"port {port}" if port is not None else "a port it binds"
    who = f"{_who(end)} could not listen"
    if "cannot host the c10d store" in end.stderr:  # the node agent's own store, not a rank's
        node = "the" if end.node_rank is None else f"node {end.node_rank}'s"
        who = f"{node} agent could not host the c10d store"
    line = f"{who}: {what} is already in use" + (f" by {holder}" if holder else "")
    evidence = [_last_match(end.stderr, _IN_USE)]
    return Diagnosis(v.PORT_IN_USE, line, tuple(e for e in evidence if e))


def _rendezvous(end: RankEnd, tb: Traceback | None) -> Diagnosis | None:
    text = tb.exception if tb else _last_line(end.stderr)
    if not _RDZV.search(text):
        return None
    m = _JOINED.search(text)
    joined = f" ({m[1]} of {m[2]} joined)" if m else ""
    line = f"{_who(end)} timed out waiting for the other ranks to join{joined}"
    waited = _waited_ranks(text)
    if waited:
        line = f"{_who(end)} timed out waiting for {_ranks(waited)} to join"
        if end.nproc:
            nodes = sorted({r // end.nproc for r in waited})
            of = f" of {end.nnodes}" if end.nnodes else ""
            which = ("node " if len(nodes) == 1 else "nodes ") + ",".join(map(str, nodes))
            line += f": {which}{of} never arrived"
    after = re.search(r"timeout after (\d+)ms", text)
    if after:
        line += f" (after {int(after[1]) / 1000:g} s)"
    return Diagnosis(v.RENDEZVOUS_TIMEOUT, line, _tb_evidence(tb) if tb else (text,))


def _waited_ranks(text: str) -> list[int]:
    """The ranks a store wait names in its keys (``keys: /default_pg/0//cpu//0/2``)."""
    m = re.search(r"keys: (.+)$", text)
    if not m:
        return []
    out = []
    for key in m[1].split(","):
        tail = key.strip().rstrip("]").rsplit("/", 1)[-1]
        if tail.isdigit():
            out.append(int(tail))
    return sorted(set(out))


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + rank_list(ranks)


def _fallout(end: RankEnd, tb: Traceback | None) -> Diagnosis | None:
    text = tb.exception if tb else _last_line(end.stderr)
    m = next((m for p in _FALLOUT if (m := p.search(text))), None)
    if m is None:
        return None
    backend = "gloo: " if "gloo" in text else "NCCL: " if "NCCL" in text else ""
    line = f"{_who(end)} lost a peer in a collective ({backend}{m.group(0)})"
    return Diagnosis(v.FALLOUT, line, _tb_evidence(tb) if tb else (text,))


def _module_missing(end: RankEnd, tb: Traceback | None) -> Diagnosis | None:
    if tb is None or tb.short_type not in ("ModuleNotFoundError", "ImportError"):
        return None
    return Diagnosis(v.MODULE_MISSING, f"{_who(end)}: {tb.exception}", _tb_evidence(tb))


def _signalled(end: RankEnd, tb: Traceback | None) -> Diagnosis | None:
    sig = end.signal
    if sig is None or sig not in _STOP_SIGNALS:
        return None
    if end.sent_by:
        return Diagnosis(v.STOPPED, f"{_who(end)} was stopped by {end.sent_by} ({sig.name})")
    evidence = []
    if sig == signal.SIGKILL:
        if end.oom_kills == 0:
            evidence.append(f"not the OOM killer: no oom_kill in {end.cgroup or 'its cgroup'}")
        if end.kernel_note:
            evidence.append(end.kernel_note)
    line = f"{_who(end)} was killed by {sig.name} from outside trainlaunch"
    return Diagnosis(v.KILLED, line, tuple(evidence))


def _exception(end: RankEnd, tb: Traceback | None) -> Diagnosis | None:
    if tb is None:
        return None
    at = f" at {tb.where}" if tb.where else ""
    evidence: tuple[str, ...] = ()
    if end.signal is not None:
        last = _last_line(end.stderr)
        then = f"then {end.signal.name} while exiting" + (f": {last}" if last else "")
        evidence = (then,)
    return Diagnosis(v.EXCEPTION, f"{_who(end)} raised {tb.exception}{at}", evidence)


def _exit_code(end: RankEnd, tb: Traceback | None) -> Diagnosis | None:
    sig = end.signal
    how = f"was killed by {sig.name}" if sig else f"exited with code {end.exit_code}"
    last = _last_line(end.stderr)
    return Diagnosis(
        v.EXIT_CODE, f"{_who(end)} {how}", (f"its last stderr line: {last}",) if last else ()
    )


_RULES = (
    _oom_killed,
    _cuda_oom,
    _host_alloc,
    _bus_error,
    _abort,
    _segfault,
    _port_in_use,
    _rendezvous,
    _fallout,
    _module_missing,
    _signalled,
    _exception,
    _exit_code,
)


def _tb_evidence(tb: Traceback | None) -> tuple[str, ...]:
    if tb is None:
        return ()
    return (tb.exception + (f" ({tb.where})" if tb.where else ""),)


def _last_line(stderr: str) -> str:
    """The last non-empty stderr line (torch's prefix and trainlaunch's notes left out)."""
    for ln in reversed(stderr.splitlines()):
        text = strip_prefix(ln).strip()
        if text and not text.startswith("[trainlaunch]"):
            return _short(text)
    return ""


def _last_match(stderr: str, pattern: re.Pattern[str]) -> str:
    for ln in reversed(stderr.splitlines()):
        if pattern.search(ln):
            return _short(strip_prefix(ln).strip())
    return ""


def _short(text: str, n: int = 200) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


__all__ = ["RankEnd", "explain", "ports_named"]
