"""The benchmark harness keeps working: a tiny `bench/run.py --smoke` run, and its tables.

The smoke run uses no peers and tiny sizes (a few seconds); its numbers are not judged here,
only that every benchmark in it produced its rows. The real suite is `python bench/run.py`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.harness import Sample, Table, Target, compare, measure, seconds  # noqa: E402


@pytest.mark.slow  # 7 s serially on a busy 2-core machine (--durations)
def test_smoke_run_prints_every_table(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    titles = {r["table"] for r in rows}
    for prefix in (
        "1. CLI latency",
        "4. list and status",
        "5. logs",
        "6. MetricLogger",
        "8. supervisor cost",
        "10. c10d store",
    ):
        assert any(t.startswith(prefix) for t in titles), (prefix, titles)
    assert all(r["result"] in {"PASS", "MISS", "SKIP", "INFO"} for r in rows), rows
    measured = [r for r in rows if r["trainlaunch"] is not None]
    assert measured and all(r["trainlaunch"] >= 0 for r in measured)
    assert "summary: PASS" in proc.stdout


def test_targets_and_verdicts() -> None:
    row = compare("status", 0.05, seconds, "torchx status", 0.1, Target("<=", 1.0))
    assert (row.ratio, row.verdict) == (0.5, "PASS")
    row = compare("list", 0.5, seconds, "list, 1 app", 0.1, Target("<=", 0.3, on="value"))
    assert row.verdict == "MISS"
    row = compare("rate", 100.0, str, "nemo", 10.0, Target(">=", 5.0))
    assert (row.ratio, row.verdict) == (10.0, "PASS")
    assert compare("x", 1.0, str).verdict == "INFO"
    text = Table("t", [row], ["a note"]).render()
    assert "ratio" in text.splitlines()[1] and "PASS" in text and "note: a note" in text


def test_measure_is_round_robin_and_drops_warmup() -> None:
    order: list[str] = []

    def case(name: str, wall: float) -> Callable[[], Sample]:
        def run() -> Sample:
            order.append(name)
            return Sample(wall=wall)

        return run

    stats = measure({"a": case("a", 1.0), "b": case("b", 3.0)}, repeats=3, warmup=1)
    assert order == ["a", "b"] * 4
    assert stats["a"].runs == 3 and stats["a"].wall == pytest.approx(1.0)
    assert stats["b"].wall == pytest.approx(3.0)
