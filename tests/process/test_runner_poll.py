"""One poller (Runner.poll) behind wait, run --wait, the live view and metrics -f."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainlaunch.errors import WaitTimeout
from trainlaunch.runner import POLL_MAX_INTERVAL, get_runner
from trainlaunch.specs import AppState, is_terminal


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    with get_runner() as r:
        yield r


def test_poll_yields_until_and_including_the_terminal_description(runner) -> None:
    handle = runner.run_component("utils.sh", ["sleep 0.5"])
    seen = []
    stamps = []
    for resp in runner.poll(handle):
        seen.append(resp.status.state)
        stamps.append(time.monotonic())
    assert seen[-1] == AppState.SUCCEEDED
    assert not any(is_terminal(s) for s in seen[:-1])
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    assert len(seen) >= 3  # a short job is polled often, not once a second
    assert max(gaps) < POLL_MAX_INTERVAL + 1.0  # the cap holds (slack: describe itself, load)
    assert runner.wait(handle).state == AppState.SUCCEEDED  # terminal: returns at once


def test_poll_raises_wait_timeout_at_the_deadline(runner) -> None:
    handle = runner.run_component("utils.sh", ["sleep 30"])
    try:
        start = time.monotonic()
        with pytest.raises(WaitTimeout) as e:
            for _ in runner.poll(handle, timeout=0.5):
                pass
        assert 0.5 <= time.monotonic() - start < 10
        assert "after 0.5s" in str(e.value) and e.value.hint
        with pytest.raises(WaitTimeout):
            runner.wait(handle, timeout=0.2)
    finally:
        runner.cancel(handle)
    assert runner.wait(handle).state == AppState.CANCELLED
