"""`trainlaunch ui` as the tests run it: a real `python -m trainlaunch ui --port 0` on
127.0.0.1 against the test's app store, its URL read from its stdout, stopped with Ctrl-C."""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

from tests.conftest import CLI, wait_until

FIXTURE = Path(__file__).parent.parent / "fixtures" / "ui" / "ranks.py"
TINY = Path(__file__).parent.parent / "fixtures" / "sweep" / "train_tiny.py"


@dataclasses.dataclass
class UI:
    """A running server: its printed URL, where it listens, its token and its process."""

    url: str
    proc: subprocess.Popen[str]
    stderr: str = ""  # what it said, once it has ended

    @property
    def base(self) -> str:
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def token(self) -> str:
        return self.url.split("token=", 1)[1]

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def enc(handle: str) -> str:
    """A handle as the page puts it in a path."""
    return quote(handle, safe="")


@contextlib.contextmanager
def ui_server(cli: CLI, *args: str) -> Iterator[UI]:
    """Start `trainlaunch ui --port 0 ARGS`; stop it with SIGINT (as Ctrl-C) afterwards and
    check that it ended as an interrupted command does (130, no traceback)."""
    proc = cli.popen("ui", "--port", "0", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline().strip()  # "" if it exited: then its stderr says why
    if not line:
        proc.wait(timeout=30)
        raise AssertionError(f"ui did not start ({proc.returncode}): {proc.stderr.read()}")
    ui = UI(line, proc)
    try:
        yield ui
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        err = proc.stderr.read()
        proc.wait(timeout=30)
    ui.stderr = err
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err and err.rstrip().endswith("interrupted"), err


def start_ranks_app(cli: CLI, go: Path, nproc: int = 2, steps: int = 30) -> str:
    """A running dist.ddp app whose ranks logged `steps` steps of loss and lr and wait for go;
    returns its handle once every rank's metrics are there."""
    handle = cli.run(
        "dist.ddp", "--env", "WANDB_API_KEY=hush-hush-0123", "--nproc", str(nproc),
        str(FIXTURE), str(go), str(steps),
    )  # fmt: skip
    metrics = cli.home / "apps" / handle.rsplit("/", 1)[1] / "metrics"

    def logged() -> bool:
        files = [metrics / f"rank{r}.jsonl" for r in range(nproc)]
        return all(f.is_file() and len(f.read_text().splitlines()) >= steps for f in files)

    wait_until(logged, timeout=60, what="every rank's metrics")
    return handle


def finished_sweep(cli: CLI) -> str:
    """A 2-point sweep (lr 0.3 and 0.03, seed 1) of the tiny trainer, waited for."""
    out = cli(
        "sweep", "--param", "lr=0.3,0.03", "--seeds", "1", "utils.python", str(TINY),
        "--lr", "{lr}", "--steps", "12", check=True,
    )  # fmt: skip
    handle = out.stdout.strip()
    assert cli("wait", handle, timeout=120).returncode == 0
    return handle


__all__ = ["UI", "enc", "finished_sweep", "start_ranks_app", "ui_server"]
