"""`trainlaunch doctor` on this machine, through the real CLI: each line ok/warn/fail with a fix,
the exit code, --strict, --json; GPUs through a stand-in nvidia-smi on PATH (the process
boundary: this machine has none), Slurm up and down."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI
from tests.unit.test_cli_imports import _imported_by
from trainlaunch.errors import ExitCode

pytestmark = pytest.mark.slow  # each run imports torch once, in the ranks' interpreter


def doctor(
    cli: CLI, *argv: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, Any]]]:
    r = cli("doctor", "--json", *argv, env=env, timeout=300)
    return r, {c["name"]: c for c in json.loads(r.stdout)["checks"]}


def test_this_machine(cli: CLI) -> None:
    r, checks = doctor(cli)
    assert checks["python"]["detail"].endswith(f"({sys.executable})")
    assert checks["ranks' python"]["detail"] == "the CLI's own (dist.ddp's default)"
    assert checks["trainlaunch"]["status"] == "ok"
    import torch

    assert checks["torch"]["detail"].startswith(f"{torch.__version__} (")
    if shutil.which("nvidia-smi") is None:
        assert checks["gpu"] == {
            "name": "gpu",
            "status": "ok",
            "detail": "no GPU (nvidia-smi not found, pynvml not installed)",
            "fix": "",
        }
    assert checks["app store"]["status"] == "ok" and str(cli.home) in checks["app store"]["detail"]
    assert checks["py-spy"]["status"] == "ok"
    for name in ("/dev/shm", "open files", "processes", "rendezvous port"):
        assert checks[name]["status"] in ("ok", "warn") and checks[name]["detail"]
    failed = [c for c in checks.values() if c["status"] == "fail"]
    assert (r.returncode == 0) == (not failed), (r.returncode, failed)


def test_the_table_and_the_exit_code_of_a_failure(cli: CLI, tmp_path: Path) -> None:
    bare = tmp_path / "bare"  # an interpreter without torch (or trainlaunch)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = str(bare / "bin" / "python")
    r = cli("doctor", "--python", python, timeout=300)
    assert r.returncode == ExitCode.APP_FAILED
    lines = r.stdout.splitlines()
    assert re.fullmatch(r"check +status  detail", lines[0])
    torch_line = next(i for i, ln in enumerate(lines) if ln.startswith("torch "))
    assert re.match(rf"torch +fail    not importable by {re.escape(python)}: ", lines[torch_line])
    assert lines[torch_line + 1].strip() == f"fix: {python} -m pip install torch"
    assert any(re.match(r"ranks' python +warn ", ln) for ln in lines)
    assert "error: 2 check(s) failed: trainlaunch, torch" in r.stderr
    assert "hint: each line's fix says what to do" in r.stderr


def test_a_warning_fails_only_with_strict(cli: CLI) -> None:
    cli.home.mkdir(parents=True)
    cli.home.chmod(0o755)  # readable by everyone: a warning with its fix
    r, checks = doctor(cli)
    assert checks["app store"] == {
        "name": "app store",
        "status": "warn",
        "detail": f"{cli.home} is mode 755",
        "fix": f"chmod 700 {cli.home}",
    }
    assert json.loads(r.stdout)["counts"]["warn"] >= 1
    strict, _ = doctor(cli, "--strict")
    if not [c for c in checks.values() if c["status"] == "fail"]:
        assert r.returncode == 0
    assert strict.returncode == ExitCode.APP_FAILED
    assert "app store" in strict.stderr and "warned (--strict)" in strict.stderr


SMI = """#!/bin/sh
echo "0, NVIDIA H200, 550.54.15, 0, 1, 143771, 0, No, 31"
echo "1, NVIDIA H200, 550.54.15, 97, 80211, 143771, 0, No, 70"
echo "2, NVIDIA H200, 550.54.15, 0, 1, 143771, 4, No, 30"
"""
DMESG = """#!/bin/sh
echo "[ 12.3] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15"
echo "[ 99.1] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus."
"""


def test_each_gpus_health_through_nvidia_smi(cli: CLI, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("nvidia-smi", SMI), ("dmesg", DMESG)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    _, checks = doctor(cli, env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert checks["driver"]["detail"] == "NVIDIA 550.54.15"
    assert checks["gpu 0"]["status"] == "ok"
    assert (
        checks["gpu 1"]["status"] == "warn"
        and "another process uses it" in checks["gpu 1"]["detail"]
    )
    assert checks["gpu 2"]["status"] == "fail"
    assert "4 uncorrected ECC errors" in checks["gpu 2"]["detail"]
    assert "nvidia-smi -r" in checks["gpu 2"]["fix"]
    assert checks["xid"]["status"] == "warn"
    assert checks["xid"]["detail"] == "1 Xid error(s) since boot (codes 79; last on PCI:0000:18:00)"


@pytest.mark.slurm
def test_slurm_up_then_down(cli: CLI, tmp_path: Path) -> None:
    conf = os.environ.get("SLURM_CONF")
    if not conf or not shutil.which("scontrol"):
        pytest.skip("no Slurm cluster configured (eval $(scripts/slurm-dev-cluster env))")
    _, checks = doctor(cli)
    assert checks["slurm"]["status"] == "ok" and " is UP (" in checks["slurm"]["detail"]
    assert checks["slurm nodes"]["status"] == "ok"
    # the same cluster's config with a controller port nobody answers (the cluster stays up)
    text = Path(conf).read_text()
    down = tmp_path / "slurm.conf"
    down.write_text(re.sub(r"(?m)^SlurmctldPort=.*$", "SlurmctldPort=1", text))
    r, checks = doctor(cli, env={"SLURM_CONF": str(down)})
    assert r.returncode == ExitCode.APP_FAILED
    assert checks["slurm"]["status"] == "fail"
    assert " is DOWN (" in checks["slurm"]["detail"] and str(down) in checks["slurm"]["detail"]
    assert "slurm nodes" not in checks


def test_doctor_never_imports_torch(tmp_path: Path) -> None:
    assert _imported_by(["doctor", "--json"], ("torch", "numpy"), tmp_path) == []
