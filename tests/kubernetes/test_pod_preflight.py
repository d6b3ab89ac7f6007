"""The preflight inside the pods: a 2-node dist.ddp in a stock image (torch, no trainlaunch).

The pods run here as the kubelet would run them (test_pod_simulation.py: the real dryrun's
manifests, the agent zipapp from the ConfigMap, each pod in its own namespaces). Their node
agents run the preflight (the probe script the zipapp carries, in the image's python) before
the same pods' ranks all-reduce.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_pod_simulation import ddp_dryrun, free_port, image, run_pods  # noqa: F401 (image: a fixture)


@pytest.mark.slow
def test_two_pods_pass_their_preflight_then_train(
    image: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    docs = ddp_dryrun(tmp_path, free_port(), preflight=True, preflight_timeout=120.0)
    job = next(d for d in docs if d["kind"] == "Job")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert "--preflight" in container["args"]  # the pods' node agents are asked for it
    results = run_pods(docs, job, image, tmp_path / "pods")
    assert {r["sum"] for r in results} == {10.0} and len(results) == 4
    for log in (tmp_path / "pods").glob("*.log"):
        text = log.read_text()
        assert "preflight passed: 2 nodes" in text and "all-reduce (gloo, 4 ranks)" in text, text
        before, _, after = text.partition("preflight passed")
        assert "RESULT " not in before and "RESULT " in after  # the ranks came after it
