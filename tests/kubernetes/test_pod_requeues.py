"""The pod's attempt on Kubernetes, in the pod simulation (test_pod_simulation.py's kubelet).

A 1-node ``dist.ddp`` from the real dryrun runs in the stock-image recipe, with the
annotations the Job controller would have set on a replacement pod (backoffLimitPerIndex):
its ranks must see ``TRAINLAUNCH_RESTART_COUNT`` = failures + requeues, and
``trainlaunch.rank.preemption.restart_count()`` must agree; a pod that comes after the
replica's last allowed requeue must end at once with the FailJob code and say why in one line.
Needs root and ``unshare``, as the simulation.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from k8s_helpers import write_kubeconfig
from test_pod_simulation import (  # noqa: F401  (image: the module's fixture)
    FAILURES,
    REQUEUES,
    free_port,
    image,
    start_pod,
)

from components import dist
from trainlaunch import settings
from trainlaunch.runner import get_runner

pytestmark = pytest.mark.pod_simulation

REPO = Path(__file__).resolve().parents[2]
# The image has no trainlaunch: the rank library comes from this checkout, as a user's own
# package would come from the image.
ATTEMPT = f"""\
import json, os, sys
sys.path.insert(0, {str(REPO)!r})
from trainlaunch.rank import preemption
print("RESULT " + json.dumps({{"rank": os.environ["RANK"],
    "env": os.environ.get("TRAINLAUNCH_RESTART_COUNT"), "api": preemption.restart_count()}}),
    flush=True)
if "--requeue" in sys.argv:
    preemption.requeue()  # as after saving on a warning
"""


def run_pod(
    stock: Path,
    tmp_path: Path,
    annotations: dict[str, str],
    script_args: tuple[str, ...] = (),
    **cfg: Any,
) -> tuple[int, str, list[dict[str, Any]]]:
    """Replica 0 of a 1-node, 2-rank dist.ddp with these pod annotations: (exit, log, results)."""
    (stock / "workspace" / "attempt.py").write_text(ATTEMPT)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1")
    app = dist.ddp(
        "attempt.py", *script_args, image="pytorch/pytorch:2.5.1", nnodes="1", nproc_per_node="2"
    )
    with get_runner("sim") as runner:
        info = runner.dryrun(
            app,
            "kubernetes",
            {"kubeconfig": str(kubeconfig), "namespace": "team", "rdzv_port": free_port(), **cfg},
        )
    docs = list(info.request.resources)
    root = tmp_path / "pods"
    root.mkdir()
    pod = start_pod(docs, docs[0], 0, stock, root, annotations)
    try:
        code = pod.wait(timeout=120)
    finally:
        if pod.poll() is None:
            os.killpg(pod.pid, 9)
            pod.wait()
    (log,) = [f.read_text() for f in root.glob("*.log")]
    results = [
        json.loads(line.split("RESULT ", 1)[1]) for line in log.splitlines() if "RESULT " in line
    ]
    return code, log, sorted(results, key=lambda r: int(r["rank"]))


@pytest.mark.parametrize(
    "annotations, attempt",
    [
        ({FAILURES: "0"}, 0),  # the first pod: no requeue yet, so no ignored-count annotation
        ({FAILURES: "1", REQUEUES: "2"}, 3),  # a failure and two requeues before this pod
        ({FAILURES: "0", REQUEUES: "3"}, 3),  # the last requeue max_requeues=3 allows
    ],
)
def test_the_ranks_see_the_pods_attempt(
    image: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    annotations: dict[str, str],
    attempt: int,
) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    code, log, results = run_pod(image, tmp_path, annotations, max_requeues=3)
    assert code == 0, log
    assert [(r["rank"], r["env"], r["api"]) for r in results] == [
        ("0", str(attempt), attempt),
        ("1", str(attempt), attempt),
    ], log
    assert "requeues exhausted" not in log


def test_a_pod_after_the_last_requeue_fails_the_job_at_once(
    image: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    code, log, results = run_pod(image, tmp_path, {FAILURES: "1", REQUEUES: "3"}, max_requeues=2)
    assert code == settings.REQUEUES_EXHAUSTED_EXIT_CODE == 76, log
    assert results == []  # no rank started
    lines = [line for line in log.splitlines() if "requeues exhausted" in line]
    assert lines == [
        "trainlaunch: requeues exhausted: replica 0 was requeued 3 times (preempted, evicted "
        "or exit 75), max_requeues=2; failing the Job (exit 76)"
    ], log


def test_a_cluster_without_the_counts_says_so(
    image: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Kubernetes < 1.29 drops backoffLimitPerIndex: the controller sets no count annotation.
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    code, log, results = run_pod(image, tmp_path, {})
    assert code == 0, log
    assert [(r["env"], r["api"]) for r in results] == [(None, 0), (None, 0)], log
    assert "has no batch.kubernetes.io/job-index-failure-count annotation" in log


@pytest.mark.parametrize("requeues, code", [("1", 75), ("2", 76)])
def test_a_requeue_asked_for_beyond_the_limit_fails_the_job_instead(
    image: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    requeues: str,
    code: int,
) -> None:
    # The ranks save and exit 75: a requeue while one is left, else the FailJob code at once.
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    annotations = {FAILURES: "0", REQUEUES: requeues}
    got, log, results = run_pod(image, tmp_path, annotations, ("--requeue",), max_requeues=2)
    assert got == code, log
    assert len(results) == 2  # both ranks ran this attempt
    exhausted = [line for line in log.splitlines() if "requeues exhausted" in line]
    expected = [
        "trainlaunch: requeues exhausted: replica 0 asked for requeue 3 (exit 75), "
        "max_requeues=2; failing the Job (exit 76)"
    ]
    assert exhausted == (expected if code == 76 else []), log
