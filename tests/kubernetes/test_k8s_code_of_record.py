"""The code of record on Kubernetes: the Job carries it (an annotation), describe reads it back."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from k8s_helpers import echo_app

from trainlaunch.rerun import META_KEY, run_record
from trainlaunch.schedulers.kubernetes.backend import KubernetesScheduler


@pytest.mark.parametrize("api", ["job", "jobset"])
def test_describe_returns_the_commit_the_app_was_submitted_from(
    k8s: KubernetesScheduler, tmp_path: Path, api: str
) -> None:
    repo = tmp_path / "proj"
    repo.mkdir()
    (repo / "train.py").write_text("print(1)\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "v1"]):
        subprocess.run(
            ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
            check=True,
        )
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    app = echo_app(1)
    record = run_record("utils.echo", [], str(repo))
    app = app.replace(metadata={**app.metadata, META_KEY: record})
    info = k8s.submit_dryrun(app, k8s.run_opts().resolve({"api": api}, "k8s"))
    resp = k8s.describe(k8s.schedule(info))
    assert resp.app is not None
    code = resp.app.metadata[META_KEY]["code"]
    assert code == record["code"] and code["git"]["commit"] == head and not code["git"]["dirty"]
