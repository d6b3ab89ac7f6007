"""diagnosis: the rules over one rank's facts and an app's nodes read together (pure; the
process tests provoke each kind for real: tests/process/test_failures_explained.py)."""

from __future__ import annotations

import signal

from trainlaunch.diagnosis import values as v
from trainlaunch.diagnosis.app import NodeOutcome, explain_app
from trainlaunch.diagnosis.rules import RankEnd, explain, ports_named
from trainlaunch.diagnosis.traceback import last_traceback

TB = 'Traceback (most recent call last):\n  File "/w/train.py", line 41, in <module>\n    f()\n'


def test_the_last_traceback_and_its_exception_line_through_chains_and_prefixes() -> None:
    text = (
        "noise\n" + TB + "KeyError: 'a'\n\nDuring handling of the above exception, another "
        "exception occurred:\n\n" + TB.replace("41", "45") + "ValueError: b\nteardown\n"
    )
    tb = last_traceback("\n".join(f"[rank3]: {ln}" for ln in text.splitlines()))
    assert tb is not None and (tb.exception, tb.type, tb.message, tb.where) == (
        "ValueError: b", "ValueError", "b", "train.py:45",
    )  # fmt: skip
    assert tb.text.startswith(TB.splitlines()[0]) and "KeyError: 'a'" in tb.text
    assert last_traceback("no traceback here\n") is None


def end(code: int, stderr: str = "", **kw: object) -> RankEnd:
    return RankEnd(rank=3, exit_code=code, stderr=stderr, **kw)  # type: ignore[arg-type]


def test_a_sigkill_is_the_oom_killer_only_with_evidence() -> None:
    oom = explain(
        end(-9, peak_rss=23 << 30, memory_limit=24 << 30, limit_where="cgroup limit", oom_kills=1)
    )
    assert oom.kind == v.OOM_KILLED
    assert oom.line == "rank 3 was killed by the OOM killer at 23 GiB (cgroup limit 24 GiB)"
    kernel = explain(end(-9, kernel=("Memory cgroup out of memory: Killed process 7 (python)",)))
    assert kernel.kind == v.OOM_KILLED and kernel.evidence[0].startswith("Memory cgroup")
    other = explain(end(-9, oom_kills=0, cgroup="/sys/fs/cgroup/x"))
    assert other.kind == v.KILLED and other.evidence == (
        "not the OOM killer: no oom_kill in /sys/fs/cgroup/x",
    )
    assert explain(end(-15, sent_by="the hang watchdog")).line == (
        "rank 3 was stopped by the hang watchdog (SIGTERM)"
    )


def test_torch_and_host_memory() -> None:
    cuda = explain(
        end(
            1,
            TB
            + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 1 has",
        )
    )
    assert (cuda.kind, cuda.line) == (
        v.CUDA_OOM,
        "rank 3 ran out of GPU memory on GPU 1: tried to allocate 20.00 MiB",
    )
    host = explain(
        end(
            1,
            TB
            + "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 1073741824 bytes. Error code 12",
        )
    )
    assert (host.kind, host.line) == (
        v.HOST_ALLOC,
        "rank 3 could not allocate 1 GiB of host memory (RuntimeError)",
    )


def test_an_abort_at_exit_with_no_exception_says_a_thread_outlived_the_interpreter() -> None:
    d = explain(end(-int(signal.SIGABRT), "done\nterminate called without an active exception\n"))
    assert (d.kind, d.line) == (
        v.ABORT,
        "rank 3 aborted (SIGABRT): terminate called without an active exception",
    )
    assert "interpreter exited" in d.evidence[0] and "os._exit(0)" in d.evidence[1], d
    other = explain(end(-int(signal.SIGABRT), "terminate called after throwing 'c10::Error'\n"))
    assert other.evidence == ("a C++ exception or assertion ended the process",)


def test_signals_ports_rendezvous_fallout_and_the_rest() -> None:
    assert explain(
        end(-int(signal.SIGABRT), "terminate called after throwing an instance of 'c10::Error'\n")
    ).line == (
        "rank 3 aborted (SIGABRT): terminate called after throwing an instance of 'c10::Error'"
    )
    assert explain(end(-int(signal.SIGBUS), shm=(64 << 20, 0))).line == (
        "rank 3 was killed by SIGBUS (bus error): shared memory is full (/dev/shm has 64 MiB (0 B free))"
    )
    held = "DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE"
    assert ports_named(held) == [29500]
    port = explain(end(1, TB + "torch.distributed." + held, port_holders={29500: "pid 9 (python)"}))
    assert port.kind == v.PORT_IN_USE and port.line.endswith(
        "port 29500 is already in use by pid 9 (python)"
    )
    rdzv = explain(
        end(
            1,
            TB
            + "torch.distributed.DistStoreError: wait timeout after 10000ms, keys: /default_pg/0//cpu//0/2, /default_pg/0//cpu//0/3",
            nproc=2,
            nnodes=2,
        )
    )
    assert (
        rdzv.line
        == "rank 3 timed out waiting for ranks 2-3 to join: node 1 of 2 never arrived (after 10 s)"
    )
    lost = explain(
        end(
            1,
            TB
            + "RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer [1.2.3.4]:5",
        )
    )
    assert (lost.kind, lost.line) == (
        v.FALLOUT,
        "rank 3 lost a peer in a collective (gloo: Connection closed by peer)",
    )
    assert (
        explain(end(1, TB + "ValueError: x\n")).line == "rank 3 raised ValueError: x at train.py:41"
    )
    assert explain(end(3, "last words\n")).evidence == ("its last stderr line: last words",)


def test_an_app_names_the_cause_its_fallout_one_nodes_module_and_missing_nodes() -> None:
    cause = v.Diagnosis(v.EXCEPTION, "rank 5 raised ValueError: x", rank=5, host="b")
    lost = v.Diagnosis(
        v.FALLOUT, "rank 0 lost a peer in a collective (gloo: Connection closed by peer)"
    )
    app = explain_app([NodeOutcome("t/0", lost), NodeOutcome("t/1", cause)])
    assert app is not None and app.line == "rank 5 raised ValueError: x (t/1 on b)"
    assert app.evidence == ("fallout on t/0: " + lost.line,)
    missing = v.Diagnosis(
        v.MODULE_MISSING, "rank 2: ModuleNotFoundError: No module named 'x'", host="b"
    )
    drift = explain_app([NodeOutcome("t/1", missing), NodeOutcome("t/0")])
    assert drift is not None and drift.line.endswith(
        "on t/1 (b) only: the nodes' environments differ"
    )
    rdzv = v.Diagnosis(v.RENDEZVOUS_TIMEOUT, "rank 0 timed out waiting for ranks 2-3 to join")
    never = explain_app([NodeOutcome("t/0", rdzv), NodeOutcome("t/1", started=False)])
    assert never is not None and never.line.startswith("node t/1 never started; rank 0 timed out")
    assert explain_app([NodeOutcome("t/0")]) is None
    assert (
        v.Diagnosis.from_dict(cause.to_dict()) == cause and v.Diagnosis.from_dict({"x": 1}) is None
    )


def test_slurm_says_why_before_the_ranks_do() -> None:
    from trainlaunch.schedulers.slurm.failure import job_failure
    from trainlaunch.schedulers.slurm.status import JobInfo
    from trainlaunch.specs import AppState, AppStatus

    failed = AppStatus(AppState.FAILED)
    oom = job_failure(JobInfo("7", "OUT_OF_MEMORY"), None, None, failed, None)
    assert oom is not None and (oom.kind, oom.evidence) == (
        v.OOM_KILLED,
        ("sacct/scontrol: OUT_OF_MEMORY",),
    )
    late = job_failure(JobInfo("7", "TIMEOUT"), None, None, failed, None)
    assert late is not None and late.line == "stopped by Slurm at the job's time limit (TIMEOUT)"
    hang = {"action": "stop", "idle_s": 9.0, "collectives": {"lines": ["ranks 0-1 wait in x"]}}
    stopped = job_failure(
        JobInfo("7", "CANCELLED by 0"), None, None, AppStatus(AppState.CANCELLED), hang
    )
    assert stopped is not None and stopped.line == (
        "stopped by the hang watchdog: no progress from any rank for 9.0s; ranks 0-1 wait in x"
    )
    assert (
        job_failure(JobInfo("7", "RUNNING"), None, None, AppStatus(AppState.RUNNING), None) is None
    )


def test_an_exception_that_teardown_aborted_is_the_exceptions_story() -> None:
    # gloo's threads abort an interpreter that exits with an uncaught exception (seen in CI):
    # the rank raised first; the abort is how it left, told as evidence.
    stderr = TB + "ValueError: rank 3 gives up\nterminate called without an active exception\n"
    d = explain(end(-int(signal.SIGABRT), stderr))
    assert (d.kind, d.line) == (
        v.EXCEPTION,
        "rank 3 raised ValueError: rank 3 gives up at train.py:41",
    )
    assert d.evidence == (
        "then SIGABRT while exiting: terminate called without an active exception",
    )
    lost = TB + "RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer\n"
    assert explain(end(-int(signal.SIGABRT), lost)).kind == v.FALLOUT
