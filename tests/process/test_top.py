"""`trainlaunch top` against real local apps: one frame as text and JSON, and the live view
driven in a real terminal (tmux: send-keys, capture-pane), polled with deadlines."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI, REPO, InProcessCLI, wait_until

STEPS = REPO / "tests" / "fixtures" / "top" / "steps.py"
TINY = REPO / "tests" / "fixtures" / "sweep" / "train_tiny.py"


def frame(cli: CLI, *args: str) -> dict[str, Any]:
    """`top --once --json`."""
    return json.loads(cli("top", "--once", "--json", *args, check=True).stdout)


def running_ddp(cli: CLI, *env: str, cfg: str = "hang_timeout=2") -> str:
    """A 4-rank dist.ddp app of the torch-free steps fixture."""
    extra = ["--env", ",".join(env)] if env else []
    return cli.run("--cfg", cfg, "dist.ddp", "--nproc", "4", *extra, str(STEPS))


def finished_sweep(cli: CLI) -> str:
    handle = cli(
        "sweep", "--param", "lr=0.1,0.3", "--seeds", "1", "utils.python", str(TINY), "--lr",
        "{lr}", "--steps", "3", check=True,
    ).stdout.strip()  # fmt: skip
    assert cli("wait", handle, timeout=120).returncode == 0
    return handle


def test_without_apps_it_says_so_and_prints_nothing(inprocess_cli: InProcessCLI) -> None:
    out = inprocess_cli("top", "--once")
    assert out.returncode == 0 and out.stdout == ""
    assert out.stderr == "no apps on local (start one: trainlaunch run ...)\n"
    doc = json.loads(inprocess_cli("top", "--json", check=True).stdout)
    assert doc["apps"] == [] and doc["notes"] == [] and doc["sweeps"] == []


def test_an_unknown_backend_is_one_line_with_a_did_you_mean(inprocess_cli: InProcessCLI) -> None:
    out = inprocess_cli("top", "--once", "-s", "locl")
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        "error: unknown scheduler 'locl'; available: local, slurm, kubernetes",
        "hint: did you mean 'local'?",
    ]


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_the_interval_must_be_a_positive_number(inprocess_cli: InProcessCLI, value: str) -> None:
    out = inprocess_cli("top", "--interval", value)
    assert out.returncode == 2 and out.stderr.startswith("error: Invalid value for '--interval'")


def test_a_typo_in_an_option_gets_a_did_you_mean(inprocess_cli: InProcessCLI) -> None:
    out = inprocess_cli("top", "--onse")
    assert out.returncode == 2 and "--once" in out.stderr


def test_the_help_example_runs(inprocess_cli: InProcessCLI) -> None:
    helped = inprocess_cli("top", "--help", check=True).stdout
    example = helped.split("Example:", 1)[1].strip().splitlines()[0].strip()
    argv = shlex.split(example)
    assert argv[:2] == ["trainlaunch", "top"], example
    assert inprocess_cli(*argv[1:]).returncode == 0


def test_help_imports_neither_textual_nor_torch(cli: CLI) -> None:
    code = (
        "import sys\nfrom trainlaunch.cli.boundary import main\n"
        "try:\n    main(['top', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('textual', 'torch', 'numpy') if m in sys.modules),"
        " file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli.env)
    assert proc.stderr.strip().splitlines()[-1] == "[]"


def on_a_terminal(cli: CLI, code: str) -> tuple[int, str]:
    """Run python code with stdout and stderr on a pseudo-terminal: (exit code, what it wrote)."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], stdout=follower, stderr=follower, env=cli.env
        )
        os.close(follower)
        chunks = []
        with contextlib.suppress(OSError):  # EIO: the terminal's other end closed
            while data := os.read(leader, 4096):
                chunks.append(data)
        return proc.wait(timeout=60), b"".join(chunks).decode()
    finally:
        os.close(leader)


WITHOUT_TEXTUAL = (
    "import sys\nsys.modules['textual'] = None  # as if it were not installed\n"
    "from trainlaunch.cli.boundary import main\nmain({argv!r})\n"
)


def test_without_textual_a_terminal_is_told_how_to_install_it_and_once_works(cli: CLI) -> None:
    code, text = on_a_terminal(cli, WITHOUT_TEXTUAL.format(argv=["top"]))
    lines = text.replace("\r\n", "\n").strip().splitlines()
    assert code == 2, text
    assert (
        lines[0]
        == "error: `trainlaunch top` on a terminal needs textual (the optional extra trainlaunch[top])"
    )
    assert lines[1].startswith("hint: ") and "[top]" in lines[1] and "top --once" in lines[1]
    assert "Traceback" not in text
    code, text = on_a_terminal(cli, WITHOUT_TEXTUAL.format(argv=["top", "--once"]))
    assert code == 0 and "no apps on local" in text, text


@pytest.mark.slow  # a 4-rank app and a sweep: ~15 s on a busy 2-core machine
def test_once_prints_running_ranks_a_stalled_rank_and_a_sweeps_points(cli: CLI) -> None:
    sweep = finished_sweep(cli)
    handle = running_ddp(cli, "STUCK_RANK=1")
    try:
        doc = wait_until(
            lambda: (
                (d := frame(cli))
                and any(r["handle"] == handle and "straggler" in r["flags"] for r in d["apps"])
                and d
            ),
            timeout=90,
            interval=0.5,
            what="the stuck rank flagged",
        )
        [row] = [r for r in doc["apps"] if r["handle"] == handle]
        assert (row["state"], row["ranks_alive"], row["world"]) == ("RUNNING", 4, 4)
        assert row["metric"] == "loss" and row["step"] > 5 and row["steps_per_s"] > 0
        assert [s["handle"] for s in doc["sweeps"]] == [sweep]
        text = cli("top", "--once", check=True).stdout.splitlines()
        assert text[0].split()[:8] == ["handle", "backend", "state", "age", "ranks", "step",
                                       "steps/s", "loss"]  # fmt: skip
        [line] = [ln for ln in text if ln.startswith(handle)]
        assert "RUNNING" in line and " 4/4 " in line and "straggler" in line
        assert any(ln.startswith(sweep) and "utils.python" in ln for ln in text)

        detail = cli("top", "--once", handle, check=True).stdout.splitlines()
        assert detail[0] == f"{handle}  RUNNING  ranks 4/4"
        assert detail[1].startswith("rank 1 without progress for")
        ranks = {ln.split()[0]: ln.split()[1] for ln in detail if re.match(r"^\d  ", ln)}
        assert ranks == {"0": "running", "1": "STALLED", "2": "running", "3": "running"}
        assert any(re.match(r"^\[steps/0 rank \d\] rank \d step \d+$", ln) for ln in detail)
        app = json.loads(cli("top", "--json", handle, check=True).stdout)
        assert [r["stalled"] for r in app["ranks"]] == [False, True, False, False]

        points = cli("top", "--once", sweep, check=True).stdout.splitlines()
        assert points[2].split() == ["#", "lr", "seed", "state", "steps", "loss", "last", "best"]
        assert [ln.split()[:5] for ln in points[3:]] == [
            ["0", "0.1", "1", "SUCCEEDED", "3"],
            ["1", "0.3", "1", "SUCCEEDED", "3"],
        ]
        piped = subprocess.run(
            ["bash", "-o", "pipefail", "-c", f"{shlex.quote(sys.executable)} -m trainlaunch top"
             " --once | head -1"],
            capture_output=True, text=True, env=cli.env, cwd=cli.cwd, timeout=60,
        )  # fmt: skip
        assert (piped.returncode, piped.stderr) == (0, "")
        assert piped.stdout.split()[0] == "handle"
    finally:
        cli("stop", handle)


class Terminal:
    """A 200x50 tmux terminal on a tmux server of its own (started with the CLI's environment,
    which the session's shell inherits), running one command."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.socket = f"tl-top-{uuid.uuid4().hex[:8]}"
        self.env, self.cwd = env, cwd

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            check=True,
            env=self.env,
            cwd=self.cwd,
        ).stdout

    def start(self, command: str) -> None:
        shell = f"{command}; echo TOP-EXIT=$?; cat"  # the pane stays: the exit code is read
        self.tmux("new-session", "-d", "-x", "200", "-y", "50", "bash", "-c", shell)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", *keys)

    def shows(self, *texts: str, timeout: float = 60) -> str:
        """The screen once every text is on it (fails with the last screen after timeout)."""
        seen = [""]

        def showing() -> str | None:
            seen[0] = self.screen()
            return seen[0] if all(t in seen[0] for t in texts) else None

        try:
            return str(wait_until(showing, timeout=timeout, interval=0.1, what=repr(texts)))
        except AssertionError as e:
            raise AssertionError(f"{e}; the screen:\n{seen[0]}") from None

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@contextlib.contextmanager
def terminal(cli: CLI, command: str) -> Iterator[Terminal]:
    """A Terminal running command, its tmux server killed afterwards whatever happened."""
    t = Terminal(cli.env, cli.cwd)
    try:
        t.start(command)
        yield t
    finally:
        t.close()


def row_of(screen: str, handle: str) -> str:
    [line] = [ln for ln in screen.splitlines() if handle in ln]
    return line


@pytest.mark.slow  # two 4-rank apps, a sweep and py-spy: ~30 s on a busy 2-core machine
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_top_in_a_terminal_shows_ranks_a_hung_rank_a_sweep_and_asks_before_stopping(
    cli: CLI,
) -> None:
    sweep = finished_sweep(cli)
    stuck = running_ddp(cli, "STUCK_RANK=1")
    healthy = running_ddp(cli)  # the newest: the first row
    top = f"{shlex.quote(sys.executable)} -m trainlaunch top --interval 0.5"
    try:
        with terminal(cli, top) as term:
            screen = term.shows("straggler", healthy, "4/4", sweep)
            assert "RUNNING" in row_of(screen, healthy) and "4/4" in row_of(screen, healthy)
            assert "straggler" in row_of(screen, stuck)
            assert screen.index(healthy) < screen.index(stuck) < screen.index(sweep)

            term.keys("Enter")  # the healthy app: its 4 ranks and their lines
            screen = term.shows(f"{healthy}  RUNNING  ranks 4/4", "rank 3 step 10")
            assert len(re.findall(r"^ [0-3] +running ", screen, re.M)) == 4, screen
            term.keys("d")
            term.shows("describe: " + healthy, '"TRAINLAUNCH_SEED"')
            term.keys("Escape")  # back to the app (q does the same)
            term.shows(f"{healthy}  RUNNING", "last line")
            term.keys("q")
            term.shows("sweeps", "straggler")

            term.keys("Down", "Enter")  # the stuck app: rank 1 stalled, the others progressing
            screen = term.shows(f"{stuck}  RUNNING", "rank 1 without progress for", "STALLED")
            assert re.search(r"^ 1 +STALLED +5 ", screen, re.M), screen
            term.keys("s")  # where every rank is, grouped, as `trainlaunch stack` prints it
            term.shows(f"stacks: {stuck}", "rank 1: <module> at steps.py:")
            term.keys("q")
            term.shows("rank 1 without progress for")
            term.keys("x")  # stop asks first; n leaves it running
            term.shows(f"Stop {stuck}?", "y: stop it")
            term.keys("n")
            term.shows(f"{stuck} left running")
            assert cli.status(stuck)["state"] == "RUNNING"
            term.keys("q")
            term.shows("sweeps", "straggler")
            term.keys("Tab", "Enter")  # the sweeps table: the sweep's points
            screen = term.shows("0.3", "SUCCEEDED", "loss last")
            assert len(re.findall(r"^ [01] +0\.[13] +1 +SUCCEEDED +3 ", screen, re.M)) == 2
            term.keys("q")
            term.shows("sweeps", "straggler")
            term.keys("q")
            screen = term.shows("TOP-EXIT=")
            assert "TOP-EXIT=0" in screen and "Traceback" not in screen

        with terminal(cli, top) as term:  # Ctrl-C: exit 130 and one line, no traceback
            term.shows("straggler")
            term.keys("C-c")
            screen = term.shows("TOP-EXIT=")
            assert "TOP-EXIT=130" in screen and "interrupted" in screen
            assert "Traceback" not in screen
    finally:
        cli("stop", stuck)
        cli("stop", healthy)


def test_the_live_view_reads_only_the_apps_on_the_screen(
    cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 running apps cost what the rows on the screen cost (docs/top.md, "Cost"): an app
    off the screen keeps what was read of it last, and is read again once the cursor gets
    there."""
    import asyncio

    from textual.widgets import DataTable

    from trainlaunch.cli.top.app import Overview, Top
    from trainlaunch.runner import get_runner

    handles = [cli.run("utils.sleep", "--seconds", "300") for _ in range(16)]
    for k, v in cli.env.items():
        monkeypatch.setenv(k, v)

    async def drive() -> None:
        with get_runner() as runner:
            app = Top(runner, ["local"], None, 0.3)
            async with app.run_test(size=(200, 14)) as pilot:
                screen = app.screen
                assert isinstance(screen, Overview)

                def read_twice() -> bool:
                    return len(screen.rows) == 16 and any(
                        r.get("live") is False for r in screen.rows.values()
                    )

                for _ in range(100):
                    await pilot.pause(0.1)
                    if read_twice():
                        break
                assert read_twice(), screen.rows
                shown = [h for h, r in screen.rows.items() if r.get("live") is not False]
                assert handles[-1] in shown  # the newest: the first row
                last = handles[0]  # the oldest: the last row, off the screen
                assert screen.rows[last]["live"] is False
                assert screen.rows[last]["world"] == 1  # as read first, not blank
                table = screen.query_one("#apps", DataTable)
                table.move_cursor(row=table.row_count - 1)
                for _ in range(100):
                    await pilot.pause(0.1)
                    if screen.rows[last].get("live") is not False:
                        break
                assert screen.rows[last].get("live") is not False
                assert screen.rows[last]["ranks_alive"] == 1

    try:
        asyncio.run(drive())
    finally:
        for handle in handles:
            cli("stop", handle)
