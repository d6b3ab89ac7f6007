"""Python, torch, CUDA and NCCL as the ranks will see them: asked of the ranks' interpreter.

The CLI never imports torch; the preflight's probe script (``--facts``: the same facts the
preflight compares) runs in the interpreter ``dist.ddp`` gives the ranks: the config's
``[component."dist.ddp"] python``, else the CLI's own.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from trainlaunch.doctor.values import Check, fail, ok, warn
from trainlaunch.preflight.probe import write_probe

PROBE_TIMEOUT_S = 120.0  # importing torch on a loaded machine takes tens of seconds


def start_probe(python: str, environ: Mapping[str, str]) -> subprocess.Popen[str] | str:
    """Start the facts probe in python (or why it cannot be started)."""
    import tempfile

    script = ""
    try:
        script = write_probe(tempfile.mkdtemp(prefix="trainlaunch-doctor-"))
        return subprocess.Popen(
            [python, script, "--facts", "--modules", "trainlaunch"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(environ),
        )
    except OSError as e:
        if script:
            shutil.rmtree(os.path.dirname(script), ignore_errors=True)
        return e.strerror or str(e)


def python_checks(python: str, origin: str) -> list[Check]:
    """The CLI's python, and whether the ranks run the same one."""
    here = f"{platform.python_version()} ({sys.executable})"
    out = [ok("python", here)]
    # a venv's python is a link to its base interpreter: the path is its identity, not the target
    found = shutil.which(python) or python
    same = os.path.abspath(found) == os.path.abspath(sys.executable)
    if same:
        out.append(ok("ranks' python", f"the CLI's own ({origin})"))
    else:
        out.append(
            warn(
                "ranks' python",
                f"{python} ({origin}), not the CLI's {sys.executable}",
                "fine if intended: it needs trainlaunch and torch (the lines below ask it)",
            )
        )
    return out


def _facts(probe: subprocess.Popen[str] | str) -> tuple[dict[str, Any] | None, str]:
    if isinstance(probe, str):
        return None, probe
    try:
        out, err = probe.communicate(timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        probe.kill()
        probe.communicate()
        return None, f"no answer within {PROBE_TIMEOUT_S:.0f} s"
    finally:  # the script's temporary directory (start_probe made it)
        script = list(probe.args)[1]  # type: ignore[arg-type]
        shutil.rmtree(os.path.dirname(str(script)), ignore_errors=True)
    for line in reversed(out.splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value, ""
    last = next((ln for ln in reversed(err.splitlines()) if ln.strip()), "")
    return None, last or f"exit code {probe.returncode}"


def torch_checks(probe: subprocess.Popen[str] | str, python: str) -> list[Check]:
    """torch, CUDA and NCCL as the probe in the ranks' interpreter found them."""
    facts, why = _facts(probe)
    if facts is None:
        return [
            fail(
                "ranks' python",
                f"{python} cannot run the probe: {why}",
                "give dist.ddp --python (or doctor --python) an interpreter that runs",
            )
        ]
    agent = (facts.get("modules") or {}).get("trainlaunch")
    out = [
        ok("trainlaunch", f"importable there ({agent})")
        if agent
        else fail(
            "trainlaunch",
            f"{python} cannot import trainlaunch (the node agent runs in it)",
            f"{python} -m pip install trainlaunch",
        )
    ]
    if not facts.get("torch"):
        return [
            *out,
            fail(
                "torch",
                f"not importable by {python}: {facts.get('torch_error')}",
                f"{python} -m pip install torch",
            ),
        ]
    out += [
        ok(
            "torch",
            f"{facts['torch']} ({facts.get('torch_path')}; import {facts.get('import_s', 0):.1f} s)",
        )
    ]
    if facts.get("torch_error"):
        out.append(warn("torch", facts["torch_error"], "reinstall torch"))
    cuda, devices = facts.get("cuda"), int(facts.get("cuda_devices") or 0)
    if not cuda:
        out.append(ok("cuda", "CPU-only torch build (gloo)"))
    elif devices:
        out.append(ok("cuda", f"CUDA {cuda}, {devices} device(s) visible to torch"))
    else:
        out.append(
            warn(
                "cuda",
                f"torch is built for CUDA {cuda} but sees no GPU",
                "check the driver (nvidia-smi) and CUDA_VISIBLE_DEVICES",
            )
        )
    if facts.get("nccl"):
        out.append(ok("nccl", f"NCCL {facts['nccl']}"))
    elif cuda:
        out.append(warn("nccl", "torch has no NCCL", "install a torch build with NCCL"))
    return out
