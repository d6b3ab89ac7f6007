"""7. Peak memory (RSS) of the CLI, of the supervisor, and of the launcher per rank.

* CLI: the peak RSS that ``/usr/bin/time`` reports for each command (see :func:`peak_rss`).
* Supervisor: ``VmHWM`` (peak RSS) of the supervisor of a running app, from /proc.
* Per rank: every process of a running ``dist.ddp`` app that is not a rank (the supervisor,
  the node agent, any helper) is summed, at ``--nproc 1`` and ``--nproc 4``, while every rank
  is alive; the ranks (scripts/sleeper.py) wait for a release file, so nothing is timed.
  torchrun's own peak at ``--nproc-per-node 4`` is shown for scale.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench.context import SCRIPTS, Context, kib, proc_status, supervisor_pid
from bench.harness import BenchError, Row, Table, Target, compare, mib, run_cmd, skipped

NAME = "memory"
TIME = "/usr/bin/time"
SLEEPER = SCRIPTS / "sleeper.py"


def descendants(root: int) -> list[int]:
    """root and every process below it (from /proc/*/stat)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            data = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        ppid = int(data[data.rfind(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cmdline(pid: int) -> list[str]:
    """The process's argv ([] if gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def is_rank(pid: int) -> bool:
    """A worker running the sleeper script (not the agent or torchrun, whose argv names it)."""
    argv = cmdline(pid)
    launcher = any(
        a == "trainlaunch.agent" or a.endswith("/torchrun") or a == "torch.distributed.run"
        for a in argv
    )
    return not launcher and any(a.endswith("sleeper.py") for a in argv)


def launcher_peak(root: int, nproc: int, timeout: float = 90) -> tuple[int, int]:
    """Once nproc ranks run below root: (summed VmHWM KiB, count) of the non-rank processes."""
    deadline = time.monotonic() + timeout
    while True:
        tree = descendants(root)
        if sum(is_rank(p) for p in tree) >= nproc:
            break
        if time.monotonic() > deadline:
            raise BenchError(f"{nproc} ranks did not start below pid {root}")
        time.sleep(0.02)
    time.sleep(0.2)  # let the launcher settle after starting the last rank
    launchers = [p for p in descendants(root) if not is_rank(p)]
    return sum(kib(proc_status(p), "VmHWM") for p in launchers), len(launchers)


def ddp_launcher(ctx: Context, nproc: int) -> tuple[int, int]:
    """Launcher peak of a running `dist.ddp --nproc N` app (supervisor + agent + helpers)."""
    release = ctx.scratch / f"release-{nproc}"
    release.unlink(missing_ok=True)
    handle = ctx.launch("dist.ddp", "--nproc", str(nproc), str(SLEEPER), str(release))
    pid = supervisor_pid(ctx.app_dir(handle))
    if pid is None:
        raise BenchError(f"no supervisor recorded for {handle}")
    try:
        return launcher_peak(pid, nproc)
    finally:
        release.touch()
        ctx.wait_terminal(handle)


def torchrun_launcher(ctx: Context, nproc: int) -> tuple[int, int]:
    """torchrun's own peak with nproc sleeping ranks."""
    assert ctx.peers.torchrun is not None
    release = ctx.scratch / f"release-peer-{nproc}"
    release.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [
            str(ctx.peers.torchrun),
            "--standalone",
            "--nproc-per-node",
            str(nproc),
            str(SLEEPER),
            str(release),
        ],
        env=ctx.env(),
        cwd=ctx.scratch,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        return launcher_peak(proc.pid, nproc)
    finally:
        release.touch()
        proc.wait(timeout=60)


def supervisor_peak(ctx: Context) -> int:
    """VmHWM of the supervisor of a running one-replica app."""
    release = ctx.scratch / "release-sup"
    release.unlink(missing_ok=True)
    handle = ctx.launch("utils.python", str(SLEEPER), str(release))
    pid = supervisor_pid(ctx.app_dir(handle))
    try:
        deadline = time.monotonic() + 60
        while ctx.state(handle).get("state") != "RUNNING":
            if time.monotonic() > deadline:
                raise BenchError(f"{handle} never reached RUNNING")
            time.sleep(0.02)
        time.sleep(0.2)
        return kib(proc_status(pid or 0), "VmHWM")
    finally:
        release.touch()
        ctx.wait_terminal(handle)


def peak_rss(argv: list[str], env: dict[str, str], cwd: Path, ok: tuple[int, ...] = (0,)) -> int:
    """Peak RSS (KiB) of one command, as `/usr/bin/time -f %M` reports it.

    Not ru_maxrss of a child of this process: Linux keeps the high-water mark of the memory
    a process had before exec, and a child forked (or vforked) from this benchmark starts as a
    copy of it, so every command would seem to need at least this process's own RSS.
    """
    with tempfile.NamedTemporaryFile("r") as out:
        run_cmd([TIME, "-f", "%M", "-o", out.name, *argv], env=env, cwd=cwd, ok=ok)
        return int(out.read().strip().splitlines()[-1])


def cli_peaks(ctx: Context) -> dict[str, int]:
    """Largest peak RSS (KiB) of each CLI command over a few runs."""
    handle = ctx.finished_app()
    env, cwd = ctx.env(), ctx.scratch
    commands: dict[str, list[str]] = {
        "--help": ["--help"],
        "status --json": ["status", "--json", handle],
        "list": ["list"],
        "logs": ["logs", handle],
        "builtins": ["builtins"],
        "run (detached)": ["run", "utils.echo", "--msg", "hi"],
    }
    peaks: dict[str, int] = {}
    for _ in range(ctx.pick(2, 1, 1)):
        for name, args in commands.items():
            peaks[name] = max(peaks.get(name, 0), peak_rss([*ctx.tl, *args], env, cwd))
    if ctx.peers.torchx is not None:
        peaks["torchx status"] = peak_rss(
            [str(ctx.peers.torchx), "status", "local_cwd://torchx/bench-unknown-app"],
            env,
            cwd,
            ok=(0, 1),
        )
    return peaks


def run(ctx: Context) -> list[Table]:
    """CLI, supervisor and per-rank launcher memory."""
    if not os.access(TIME, os.X_OK):
        return [
            Table(
                "7. peak memory", [skipped("memory", f"{TIME} is missing (apt-get install time)")]
            )
        ]
    peaks = cli_peaks(ctx)
    torchx = peaks.pop("torchx status", None)
    cli_goal = Target("<=", 40, on="value", unit="MiB")
    rows: list[Row] = [
        compare(
            f"CLI {name} peak RSS",
            value / 1024,
            mib,
            "torchx status",
            torchx / 1024 if torchx else None,
            cli_goal,
        )
        for name, value in peaks.items()
    ]
    rows.append(
        compare(
            "supervisor peak RSS (1 replica)",
            supervisor_peak(ctx) / 1024,
            mib,
            target=Target("<=", 30, on="value", unit="MiB"),
        )
    )
    one, n_one = ddp_launcher(ctx, 1)
    four, n_four = ddp_launcher(ctx, 4)
    rows.append(
        compare(
            "launcher peak RSS, dist.ddp --nproc 4", four / 1024, mib, "same, --nproc 1", one / 1024
        )
    )
    rows.append(
        compare(
            "launcher RSS per extra rank",
            max(four - one, 0) / 3 / 1024,
            mib,
            target=Target("<=", 1, on="value", unit="MiB"),
        )
    )
    rows.append(
        compare(
            "launcher processes, --nproc 4",
            n_four,
            str,
            "same, --nproc 1",
            n_one,
            Target("<=", 1.0),
        )
    )
    if ctx.peers.torchrun is not None:
        peak, _ = torchrun_launcher(ctx, 4)
        rows.append(
            compare(
                "launcher peak RSS, 4 ranks",
                four / 1024,
                mib,
                "torchrun --nproc-per-node 4",
                peak / 1024,
            )
        )
    else:
        rows.append(skipped("launcher peak RSS, 4 ranks", ctx.peers.why("torchrun")))
    notes = [
        "CLI: /usr/bin/time's maximum resident set size (largest of the runs); supervisor "
        "and launchers: VmHWM from /proc while every rank is alive",
        "launcher = every process of the app that is not a rank (supervisor + node agent)",
    ]
    return [Table("7. peak memory", rows, notes)]
