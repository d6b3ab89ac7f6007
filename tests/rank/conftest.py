"""Shared helpers for the rank-library tests: clean rank environment, child processes, polling."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RANK_ENV = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
    "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
)  # fmt: skip


@pytest.fixture(autouse=True)
def clean_rank_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts as a plain single process with nothing injected."""
    for name in list(os.environ):
        if name.startswith("TRAINLAUNCH_") or name in RANK_ENV:
            monkeypatch.delenv(name)
    yield


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child Python that imports this checkout, minus rank variables."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TRAINLAUNCH_") and k not in RANK_ENV
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def run_child(
    code: str, *, cwd: Path | None = None, timeout: float = 60, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter and return its completed process."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_child(code: str, *, cwd: Path | None = None, **env: str) -> subprocess.Popen[str]:
    """Start ``code`` in a fresh interpreter with pipes for stdin and stdout."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=child_env(**env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)  # a poll interval, not synchronisation: the condition decides


def free_port() -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Helpers:
    """The helpers above, as a fixture: test modules need not import conftest by name."""

    repo = REPO
    child_env = staticmethod(child_env)
    run_child = staticmethod(run_child)
    start_child = staticmethod(start_child)
    wait_for = staticmethod(wait_for)
    free_port = staticmethod(free_port)


@pytest.fixture
def helpers() -> type[Helpers]:
    """Child-process and polling helpers."""
    return Helpers
