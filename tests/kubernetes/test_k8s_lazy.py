"""The backend loads the ``kubernetes`` client only when it talks to a cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DRYRUN = """
import sys
from trainlaunch.schedulers import get_scheduler
from trainlaunch.specs import AppDef, Role
s = get_scheduler("k8s", "s")
cfg = s.run_opts().resolve({"namespace": "team"}, "kubernetes")
text = str(s.submit_dryrun(AppDef("a", (Role("r", "true", image="busybox"),)), cfg))
assert "kind: Job" in text, text
print(",".join(m for m in ("kubernetes", "urllib3", "pydantic") if m in sys.modules))
"""


def test_dryrun_in_a_fresh_interpreter_does_not_import_the_client(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KUBECONFIG": str(tmp_path / "none")}
    out = subprocess.run(
        [sys.executable, "-c", DRYRUN],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
