"""A rank range on the command line costs what the app has (issue 23 #10).

`stack --rank 0-99999999999 H` expanded the range before looking at the app: memory grew
until MemoryError (exit 70). The CLIs here run under a 1 GiB address-space limit, so a
regression fails fast instead of taking the machine's memory.
"""

from __future__ import annotations

import resource
import subprocess

from tests.conftest import CLI, wait_until

HUGE = "0-99999999999"
LIMIT = 1 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def limited(cli: CLI, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI under an address-space limit."""
    proc = cli.popen(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_limited)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_huge_rank_ranges_are_bounded_by_the_app(cli: CLI) -> None:
    (cli.cwd / "two.py").write_text("import time\nprint('ready', flush=True)\ntime.sleep(300)\n")
    handle = cli.run("dist.ddp", "--nproc", "2", "--tee", "3", "two.py")
    try:
        wait_until(
            lambda: cli("logs", handle).stdout.count("ready") == 2, timeout=60, what="2 ranks"
        )
        stack = limited(cli, "stack", "--rank", HUGE, handle)
        assert stack.returncode == 2, stack.stderr
        assert stack.stderr.startswith(f"error: {handle} has no rank 2-99999999999; ranks: 0-1")
        one = limited(cli, "stack", "--rank", "1,5-99999999999", handle)
        assert "has no rank 5-99999999999" in one.stderr, one.stderr
        logs = limited(cli, "logs", "--ranks", HUGE, "--merge", handle)
        assert logs.returncode == 0, logs.stderr
        assert logs.stdout.splitlines() == ["[two/0 ranks 0-1] ready"], logs.stdout
    finally:
        cli("stop", handle)
