"""docs/python-api.md runs: each of its Python blocks for real (local backend, real processes),
and it walks the seed's examples and documents every public Runner method."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys

import pytest

from tests.conftest import CLI, REPO
from trainlaunch.runner import Runner

PAGE = REPO / "docs" / "python-api.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


@pytest.mark.parametrize("n", range(len(BLOCKS)))
def test_each_block_runs(cli: CLI, n: int) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", BLOCKS[n]],
        capture_output=True,
        text=True,
        env=cli.env,
        cwd=cli.cwd,
        timeout=180,
    )
    assert proc.returncode == 0, f"block {n}:\n{BLOCKS[n]}\n{proc.stderr}"


def test_the_seeds_examples_are_there() -> None:
    text = "\n".join(BLOCKS)
    for example in (
        "with get_runner() as runner:",
        "runner.close()",
        "dryrun_info = runner.dryrun(",
        "runner.schedule(dryrun_info)",
        'runner.log_lines(app_handle, "echo", k=1)',
        'runner.run_component("dist.ddp", [',
        'runner.run_opts()["local"]',
        "print(runner.status(app_handle))",
    ):
        assert example in text, example


def test_every_public_runner_method_is_documented() -> None:
    text = PAGE.read_text()
    public = [n for n, _ in inspect.getmembers(Runner, inspect.isfunction) if not n.startswith("_")]
    missing = [n for n in public if f"{n}(" not in text]
    assert missing == []
