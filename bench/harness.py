"""Timing real processes, interleaved medians, and the result tables every benchmark prints.

A measurement is one :class:`Sample` (wall seconds, CPU seconds, peak RSS) of one run. Cases
that are compared with each other are measured round-robin (:func:`measure`), so a burst of
load from elsewhere on the machine hits every case alike instead of skewing one of them.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

MIB = 1024 * 1024
Points = list[tuple[float, float]]


class BenchError(RuntimeError):
    """A benchmarked command failed: the benchmark cannot report a number."""


@dataclasses.dataclass(frozen=True)
class Sample:
    """One run: wall time, CPU time (user+sys, the process and its waited-for children), RSS."""

    wall: float
    cpu: float = 0.0
    maxrss_kib: int = 0


@dataclasses.dataclass(frozen=True)
class Stats:
    """Medians over the kept runs of one case."""

    wall: float
    cpu: float
    maxrss_kib: int
    runs: int
    walls: tuple[float, ...]

    @classmethod
    def of(cls, samples: Sequence[Sample]) -> Stats:
        """Median wall and CPU, the largest peak RSS."""
        if not samples:
            raise BenchError("no samples")
        walls = tuple(s.wall for s in samples)
        return cls(
            wall=statistics.median(walls),
            cpu=statistics.median(s.cpu for s in samples),
            maxrss_kib=max(s.maxrss_kib for s in samples),
            runs=len(samples),
            walls=walls,
        )


def run_cmd(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    ok: Sequence[int] = (0,),
    timeout: float = 300.0,
    stdout: int | IO[Any] | None = None,
) -> Sample:
    """Run argv to completion; wall, CPU and peak RSS come from wait4 (psutil-free)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            list(argv),
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL if stdout is None else stdout,
            stderr=err,
        )
        rc, usage = _wait4(proc, time.monotonic() + timeout)
        wall = time.perf_counter() - t0
        if rc not in ok:
            err.seek(0)
            tail = err.read().decode(errors="replace").strip().splitlines()[-8:]
            raise BenchError(f"{' '.join(argv)} exited {rc}:\n  " + "\n  ".join(tail))
    return Sample(wall=wall, cpu=usage.ru_utime + usage.ru_stime, maxrss_kib=usage.ru_maxrss)


def _wait4(proc: subprocess.Popen[Any], deadline: float) -> tuple[int, Any]:
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage
        if time.monotonic() > deadline:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            raise BenchError(f"{proc.args!r} timed out")
        time.sleep(0.001)


def measure(
    cases: Mapping[str, Callable[[], Sample]],
    repeats: int,
    warmup: int = 1,
    between: Callable[[], None] | None = None,
) -> dict[str, Stats]:
    """Run every case warmup+repeats times, round-robin; medians of the kept runs."""
    kept: dict[str, list[Sample]] = {name: [] for name in cases}
    for round_ in range(warmup + repeats):
        for name, case in cases.items():
            sample = case()
            if between is not None:
                between()  # untimed clean-up (e.g. let a detached app finish)
            if round_ >= warmup:
                kept[name].append(sample)
    return {name: Stats.of(samples) for name, samples in kept.items()}


def cmd_case(argv: Sequence[str], **kw: Any) -> Callable[[], Sample]:
    """A case that runs one command (see run_cmd)."""
    return lambda: run_cmd(argv, **kw)


def cpu_note(stats: Mapping[str, Stats]) -> str:
    """One line with the median CPU time (user+sys) of every case: steadier than wall time
    when other work shares the machine."""
    return "cpu (user+sys, median): " + ", ".join(
        f"{name} {seconds(s.cpu)}" for name, s in stats.items()
    )


# --- results ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Target:
    """A goal: ``ratio <= 1.0`` (against the peer) or ``value <= 0.3`` (absolute, in unit)."""

    op: str  # "<=" or ">="
    bound: float
    on: str = "ratio"  # "ratio" or "value"
    unit: str = ""

    def met(self, value: float) -> bool:
        """Whether value satisfies the goal."""
        return value <= self.bound if self.op == "<=" else value >= self.bound

    def __str__(self) -> str:
        prefix = "" if self.on == "ratio" else "value "
        unit = f" {self.unit}" if self.unit else ""
        return f"{prefix}{self.op} {self.bound:g}{unit}"


@dataclasses.dataclass
class Row:
    """One line of a result table."""

    metric: str
    ours: str
    peer: str = "-"
    peer_value: str = "-"
    ratio: float | None = None
    target: Target | None = None
    verdict: str = "INFO"  # PASS, MISS, INFO, SKIP
    ours_raw: float | None = None
    peer_raw: float | None = None


def compare(
    metric: str,
    ours: float,
    fmt: Callable[[float], str],
    peer: str = "-",
    peer_value: float | None = None,
    target: Target | None = None,
) -> Row:
    """A row comparing ours with a peer (ratio = ours / peer) and judging the target."""
    ratio = ours / peer_value if peer_value else None
    verdict = "INFO"
    if target is not None:
        judged = ratio if target.on == "ratio" else ours
        verdict = "SKIP" if judged is None else ("PASS" if target.met(judged) else "MISS")
    return Row(
        metric,
        fmt(ours),
        peer,
        fmt(peer_value) if peer_value is not None else "-",
        ratio,
        target,
        verdict,
        ours,
        peer_value,
    )


def skipped(
    metric: str, why: str, target: Target | None = None, peer: str = "-", ours: str = "-"
) -> Row:
    """A row whose comparison could not be made (peer missing), and why."""
    return Row(metric, ours, peer, why, None, target, "SKIP")


@dataclasses.dataclass
class Table:
    """One benchmark's results."""

    title: str
    rows: list[Row]
    notes: list[str] = dataclasses.field(default_factory=list)
    # chart title -> (x, y) points, or line label -> points for several lines in one chart;
    # drawn by `bench/run.py --plot DIR`
    series: dict[str, Points | dict[str, Points]] = dataclasses.field(default_factory=dict)

    def render(self) -> str:
        """Fixed-width text: metric, trainlaunch, peer, peer value, ratio, target, result."""
        head = ("metric", "trainlaunch", "peer", "peer value", "ratio", "target", "result")
        body = [
            (
                r.metric,
                r.ours,
                r.peer,
                r.peer_value,
                "-" if r.ratio is None else f"{r.ratio:.3g}",
                "-" if r.target is None else str(r.target),
                r.verdict,
            )
            for r in self.rows
        ]
        widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
        out = [f"== {self.title} =="]
        for line in [head, *body]:
            cells = (cell.ljust(w) for cell, w in zip(line, widths, strict=True))
            out.append("  ".join(cells).rstrip())
        out.extend(f"   note: {n}" for n in self.notes)
        return "\n".join(out)


def seconds(v: float) -> str:
    """0.123 s / 12.3 ms."""
    return f"{v * 1000:.1f} ms" if v < 0.1 else f"{v:.3f} s"


def mib(v: float) -> str:
    """12.3 MiB."""
    return f"{v:.1f} MiB"


def per_second(v: float) -> str:
    """1,234,567/s."""
    return f"{v:,.0f}/s"
