"""A sweep whose points were never submitted (a submission that failed half-way) reads as
such: `wait` names the point and hints `status SWEEP`, never `first: None` and
`trainlaunch logs None` (issue 23 #15)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import CLI
from trainlaunch.sweeps.record import write_sweep

SWEEP = "sweep:abcdefghjk"


def test_wait_on_a_sweep_with_no_point_submitted(
    inprocess_cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(inprocess_cli.home))
    points = [{"index": i, "params": {"x": str(i)}, "seed": None, "handle": None} for i in (0, 1)]
    write_sweep(
        {"version": 1, "id": SWEEP.split(":")[1], "scheduler": "local", "session": "trainlaunch",
         "component": "utils.echo", "args": ["--msg", "{x}"], "max_parallel": None,
         "created": 0.0, "points": points}
    )  # fmt: skip
    handle = f"local://trainlaunch/{SWEEP}"
    for flags in ([], ["--json"]):
        proc = inprocess_cli("wait", *flags, SWEEP)
        assert proc.returncode == 1, proc.stderr
        assert "None" not in proc.stderr, proc.stderr
        assert proc.stderr.splitlines() == [
            f"error: {handle}: 2 of 2 apps never submitted (first: point 0)",
            f"hint: trainlaunch status {handle}",
        ]
    doc = json.loads(inprocess_cli("wait", "--json", SWEEP).stdout)
    assert [p["state"] for p in doc["points"]] == ["UNSUBMITTED", "UNSUBMITTED"]
