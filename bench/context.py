"""What every benchmark shares: sizes for the mode, a private app store, our CLI and the peers."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.harness import BenchError
from bench.peers import Peers

BENCH_DIR = Path(__file__).resolve().parent
SCRIPTS = BENCH_DIR / "scripts"
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


@dataclasses.dataclass
class Context:
    """Mode, scratch space, environment and peers of one bench run."""

    mode: str  # "full", "quick" or "smoke"
    scratch: Path
    peers: Peers
    python: Path = Path(sys.executable)  # the interpreter trainlaunch is installed in
    # label -> site directory of a variant of trainlaunch (bench/variants.py, --before)
    variants: dict[str, Path] = dataclasses.field(default_factory=dict)
    _finished: str | None = None

    @property
    def quick(self) -> bool:
        """Smaller sizes and fewer repeats (quick and smoke)."""
        return self.mode != "full"

    @property
    def smoke(self) -> bool:
        """The tiny run of the test suite."""
        return self.mode == "smoke"

    def pick(self, full: Any, quick: Any, smoke: Any) -> Any:
        """The value for this mode."""
        return {"full": full, "quick": quick, "smoke": smoke}[self.mode]

    @property
    def home(self) -> Path:
        """The private TRAINLAUNCH_HOME of this run."""
        return self.scratch / "home"

    def env(self, home: Path | None = None, /, **extra: str) -> dict[str, str]:
        """A clean environment for launchers: no user config, no inherited rank settings."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TRAINLAUNCH_", "PET_", "TORCHELASTIC_"))
            and k
            not in (
                "OMP_NUM_THREADS",
                "MASTER_ADDR",
                "MASTER_PORT",
                "RANK",
                "WORLD_SIZE",
                "LOCAL_RANK",
                "LOGLEVEL",
            )
        }
        env.update(
            {
                "TRAINLAUNCH_HOME": str(home or self.home),
                "TRAINLAUNCH_CONFIG": "",
                "XDG_CONFIG_HOME": str(self.scratch / "xdg-config"),
            }
        )
        env.update(extra)
        return env

    def peer_env(self, **extra: str) -> dict[str, str]:
        """Our environment with the peers venv's bin first on PATH (torchx runs `torchrun`)."""
        env = self.env(**extra)
        if self.peers.torchx is not None:
            env["PATH"] = f"{self.peers.torchx.parent}{os.pathsep}{env.get('PATH', '')}"
        return env

    # --- our CLI ---------------------------------------------------------------------------------

    @property
    def tl(self) -> list[str]:
        """How a user starts trainlaunch: the console script, else python -m."""
        script = self.python.parent / "trainlaunch"
        if script.exists():
            return [str(script)]
        return [str(self.python), "-m", "trainlaunch"]

    def variant_tl(self, label: str) -> list[str]:
        """The console script of a variant (run it with variant_env(label))."""
        return [str(self.variants[label] / "bin" / "trainlaunch")]

    def variant_env(self, label: str, **extra: str) -> dict[str, str]:
        """env() with PYTHONPATH naming the variant's site, inherited by all its processes."""
        return self.env(PYTHONPATH=str(self.variants[label]), **extra)

    def tl_out(
        self, *args: str, home: Path | None = None, cwd: Path | None = None, timeout: float = 120
    ) -> str:
        """Run trainlaunch, return stdout; BenchError on failure."""
        proc = subprocess.run(
            [*self.tl, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env(home),
            cwd=cwd or self.scratch,
        )
        if proc.returncode != 0:
            raise BenchError(
                f"trainlaunch {' '.join(args)} -> {proc.returncode}: {proc.stderr.strip()[-500:]}"
            )
        return proc.stdout

    def launch(self, *args: str, home: Path | None = None, cwd: Path | None = None) -> str:
        """`trainlaunch run ARGS` (detached); the handle."""
        return self.tl_out("run", *args, home=home, cwd=cwd).strip().splitlines()[-1]

    def app_dir(self, handle: str, home: Path | None = None) -> Path:
        """The store directory of a local handle."""
        return (home or self.home) / "apps" / handle.rsplit("/", 1)[1]

    def state(self, handle: str, home: Path | None = None) -> dict[str, Any]:
        """The supervisor's last record ({} before the first one)."""
        try:
            return dict(json.loads((self.app_dir(handle, home) / "state.json").read_text()))
        except (FileNotFoundError, ValueError):
            return {}

    def wait_terminal(self, handle: str, home: Path | None = None, timeout: float = 120) -> str:
        """Poll the store until the app has ended; its final state."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state(handle, home).get("state")
            if state in TERMINAL:
                return str(state)
            time.sleep(0.01)
        raise BenchError(f"{handle} did not end within {timeout} s")

    def finished_app(self) -> str:
        """The handle of one finished echo app in the run's store (created once)."""
        if self._finished is None:
            handle = self.launch("utils.echo", "--msg", "bench")
            if self.wait_terminal(handle) != "SUCCEEDED":
                raise BenchError(f"{handle} did not succeed")
            self._finished = handle
        return self._finished

    def fresh_dir(self, name: str) -> Path:
        """An empty scratch subdirectory."""
        path = self.scratch / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path


def supervisor_pid(app_dir: Path) -> int | None:
    """The supervisor's pid as the CLI recorded it at launch."""
    try:
        return int(json.loads((app_dir / "supervisor.json").read_text())["pid"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def proc_status(pid: int) -> Mapping[str, str]:
    """/proc/<pid>/status as a dict ({} if the process is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def kib(status: Mapping[str, str], key: str) -> int:
    """A `NNN kB` field of /proc/<pid>/status, in KiB (0 if absent)."""
    try:
        return int(status.get(key, "0 kB").split()[0])
    except (ValueError, IndexError):
        return 0
