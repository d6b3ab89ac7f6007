"""A 2-node dist.ddp in a stock image, its pods run here the way the kubelet would run them.

The manifests come from the real dryrun (``Runner.dryrun``, so with the rank settings `run`
injects and the real agent zipapp). Each pod of the Indexed Job then becomes a process in its
own mount and UTS namespaces (``unshare``, as root) with:

* its container's ``command`` + ``args`` and ``env``, ``$(VAR)`` expanded as the kubelet does,
  the downward-API values filled in for its completion index, ``HOSTNAME``, ``PATH`` and
  ``HOME`` as a container runtime sets them, and nothing else (``env -i``);
* its volumes at their real mount paths: the ConfigMap's files (read-only) at
  ``/opt/trainlaunch`` over an overlay of the host's ``/opt`` (the host is not touched),
  ``/dev/shm`` as a fresh tmpfs;
* its hostname, and the headless Service's DNS names resolving to this host (an ``/etc/hosts``
  bind-mounted in its namespace);
* the "image": a virtualenv with torch and **without** trainlaunch, its ``bin`` first on
  ``PATH``, and a working directory holding the training script.

The two pods' 4 ranks must all-reduce over gloo and exit 0. Needs root and ``unshare``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest
from k8s_controllers import jobset_children, trainjob_jobset
from k8s_helpers import kubelet_expand, write_kubeconfig

from components import dist
from trainlaunch.runner import get_runner
from trainlaunch.schedulers.kubernetes.trainjob import runtime_manifest

pytestmark = pytest.mark.pod_simulation

REQUIRE = "TRAINLAUNCH_REQUIRE_POD_SIMULATION"  # CI sets it: then a missing unshare fails


def need_namespaces() -> None:
    """Skip (or fail, under REQUIRE) where mount namespaces cannot be made."""
    why = ""
    if os.geteuid() != 0:
        why = "the pod simulation needs root (mount namespaces, overlay and bind mounts)"
    elif shutil.which("unshare") is None:
        why = "the pod simulation needs unshare (util-linux)"
    if why:
        if os.environ.get(REQUIRE):
            pytest.fail(f"{why}; {REQUIRE} is set")
        pytest.skip(why)


TRAIN = """\
import json, os, socket
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
        "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TRAINLAUNCH_METRICS_PATH",
        "TRAINLAUNCH_SEED", "TRAINLAUNCH_REPLICA_ID", "JOB_COMPLETION_INDEX",
        "TRAINLAUNCH_APP_ID", "TRAINLAUNCH_RANK0_HOST", "HF_TOKEN", "PET_NNODES")
print("RESULT " + json.dumps({"sum": t.item(), "host": socket.gethostname(),
                              "env": {k: os.environ.get(k) for k in keys}}), flush=True)
dist.destroy_process_group()
"""
FAILURES = "batch.kubernetes.io/job-index-failure-count"
REQUEUES = "batch.kubernetes.io/job-index-ignored-failure-count"
INDEX = "batch.kubernetes.io/job-completion-index"
FIELD_PATHS = {  # what the kubelet fills in from the pod (the Job controller sets the index)
    f"metadata.annotations['{INDEX}']": lambda pod: pod["index"],
    "metadata.name": lambda pod: pod["name"],
    "metadata.namespace": lambda pod: pod["namespace"],
}
_ANNOTATION = re.compile(r"^metadata\.annotations\['([^']+)'\]$")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with torch (this venv's site-packages, unprocessed) but no trainlaunch."""
    need_namespaces()
    root = tmp_path_factory.mktemp("image")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # A plain path entry to this venv's packages less trainlaunch's own: no .pth file there is
    # processed (the editable finder), and no trainlaunch metadata is seen (its torch.backends
    # entry point would name a module this image lacks, as in a stock image it does not).
    stock = root / "site-packages"
    stock.mkdir()
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        if not entry.name.startswith(("trainlaunch", "__editable__")):
            (stock / entry.name).symlink_to(entry)
    (site / "torch_only.pth").write_text(f"{stock}\n")
    workdir = root / "workspace"
    workdir.mkdir()
    (workdir / "train.py").write_text(TRAIN)
    return root


def image_python(image: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{image / 'venv' / 'bin'}:/usr/bin:/bin", "HOME": "/root"}
    return subprocess.run(
        ["python3", "-c", code], env=env, cwd=image / "workspace", capture_output=True, text=True
    )


def test_the_image_has_torch_but_not_trainlaunch(image: Path) -> None:
    assert image_python(image, "import torch").returncode == 0
    r = image_python(image, "import trainlaunch")
    assert r.returncode != 0 and "No module named 'trainlaunch'" in r.stderr
    assert image_python(image, "import components.dist").returncode != 0


def pod_env(
    container: dict[str, Any],
    pod: dict[str, Any],
    base: dict[str, str],
    secrets: dict[str, dict[str, str]] | None = None,
) -> dict[str, str]:
    """The container's environment: the runtime's, then the spec's in order, expanded.

    pod["annotations"]: the pod's (its template's and its controllers'; an absent one reads
    ''); secrets: the app's Secrets' data by name (a value from one is never expanded)."""
    env = dict(base)
    for e in container.get("env", []):
        source = e.get("valueFrom") or {}
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            env[e["name"]] = (secrets or {})[ref["name"]][ref["key"]]
        elif "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            if path in FIELD_PATHS:
                env[e["name"]] = FIELD_PATHS[path](pod)
            else:
                m = _ANNOTATION.match(path)
                assert m, f"the simulation does not know field {path}"
                env[e["name"]] = pod["annotations"].get(m[1], "")
        else:
            env[e["name"]] = kubelet_expand(e["value"], env)
    return env


def pod_script(mounts: list[tuple[Path, str]], hosts: Path, hostname: str, workdir: Path) -> str:
    """Shell run inside the pod's namespaces before its command: volumes, hosts, hostname."""
    lines = ["set -e", f"hostname {shlex.quote(hostname)}"]
    overlaid: set[str] = set()
    for source, target in mounts:
        parent = os.path.dirname(target)
        if not os.path.exists(target) and parent not in overlaid:
            # an image with this directory: the host's, plus what the pod adds (a private layer)
            layer = source.parent / f"overlay-{len(overlaid)}"
            (layer / "upper").mkdir(parents=True)
            (layer / "work").mkdir()
            lines.append(
                f"mount -t overlay overlay -o lowerdir={parent},upperdir={layer / 'upper'},"
                f"workdir={layer / 'work'} {parent}"
            )
            overlaid.add(parent)
        lines.append(f"mkdir -p {shlex.quote(target)}")
        if str(source) == "tmpfs":
            lines.append(f"mount -t tmpfs tmpfs {shlex.quote(target)}")
        else:
            lines.append(f"mount --bind {shlex.quote(str(source))} {shlex.quote(target)}")
            lines.append(f"mount -o remount,bind,ro {shlex.quote(target)}")
    lines.append(f"mount --bind {shlex.quote(str(hosts))} /etc/hosts")
    lines.append(f"cd {shlex.quote(str(workdir))}")
    return "\n".join(lines)


def start_pod(
    docs: list[dict[str, Any]],
    job: dict[str, Any],
    index: int,
    image: Path,
    root: Path,
    annotations: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start replica `index` of `job` as the kubelet would; its output goes to root/<pod>.log."""
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    spec = job["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    template_annotations = (job["spec"]["template"].get("metadata") or {}).get("annotations") or {}
    pod = {
        "index": str(index),
        "name": f"{name}-{index}-abcde",
        "namespace": ns,
        # the template's, then what the Job controller set on this pod
        "annotations": {**template_annotations, INDEX: str(index), **(annotations or {})},
    }
    hostname = f"{name}-{index}"
    podroot = root / hostname
    podroot.mkdir()
    volumes = {v["name"]: v for v in spec["volumes"]}
    configmaps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    mounts: list[tuple[Path, str]] = []
    for m in container["volumeMounts"]:
        v = volumes[m["name"]]
        if "configMap" in v:
            data = podroot / f"configmap-{m['name']}"
            data.mkdir()
            cm = configmaps[v["configMap"]["name"]]
            for key, value in cm.get("binaryData", {}).items():
                (data / key).write_bytes(base64.b64decode(value))
                (data / key).chmod(v["configMap"].get("defaultMode", 0o644))
            mounts.append((data, m["mountPath"]))
        elif v.get("emptyDir", {}).get("medium") == "Memory":
            mounts.append((Path("tmpfs"), m["mountPath"]))
        else:
            raise AssertionError(f"the simulation does not know volume {v}")
    # the headless Service: every replica's DNS names resolve to this host
    svc = spec["subdomain"]
    n = job["spec"]["completions"]
    hosts = podroot / "hosts"
    names = [
        f"{name}-{k}.{svc}.{ns}.svc.cluster.local {name}-{k}.{svc}.{ns}.svc {name}-{k}.{svc}"
        for k in range(n)
    ]
    hosts.write_text("127.0.0.1 localhost\n" + "".join(f"127.0.0.1 {h}\n" for h in names))
    base = {
        "PATH": f"{image / 'venv' / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOSTNAME": hostname,
        "HOME": "/root",
    }
    # what the Job controller adds to an Indexed Job's containers, and the kubelet's API service
    # variables (set even with enableServiceLinks: false)
    index_ref = {"fieldRef": {"fieldPath": next(iter(FIELD_PATHS))}}
    container = {
        **container,
        "env": [*container["env"], {"name": "JOB_COMPLETION_INDEX", "valueFrom": index_ref}],
    }
    base.update(KUBERNETES_SERVICE_HOST="10.96.0.1", KUBERNETES_SERVICE_PORT="443")
    secrets = {d["metadata"]["name"]: d["stringData"] for d in docs if d["kind"] == "Secret"}
    env = pod_env(container, pod, base, secrets)
    argv = [kubelet_expand(a, env) for a in container["command"] + container.get("args", [])]
    script = pod_script(mounts, hosts, hostname, image / "workspace")
    exec_line = "exec env -i " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items()) + ' "$@"'
    log = (root / f"{hostname}.log").open("wb")
    return subprocess.Popen(
        [
            "unshare",
            "--mount",
            "--uts",
            "--propagation",
            "private",
            "--fork",
            "--",
            "/bin/sh",
            "-c",
            f"{script}\n{exec_line}",
            "pod",
            *argv,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        start_new_session=True,
    )


def run_pods(docs: list[dict[str, Any]], job: dict[str, Any], image: Path, root: Path) -> list[Any]:
    """Every replica of `job` as a pod at once; their ranks' RESULT lines, once all exit 0."""
    root.mkdir()
    pods = [start_pod(docs, job, k, image, root) for k in range(job["spec"]["completions"])]
    deadline = time.monotonic() + 180
    try:
        for p in pods:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for p in pods:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    logs = {f.stem: f.read_text() for f in root.glob("*.log")}
    assert [p.returncode for p in pods] == [0] * len(pods), logs
    return [
        json.loads(line.split("RESULT ", 1)[1])
        for text in logs.values()
        for line in text.splitlines()
        if "RESULT " in line
    ]


def ddp_dryrun(tmp_path: Path, port: int, **cfg: Any) -> list[dict[str, Any]]:
    """The real dryrun's objects of a 2-node x 2-worker dist.ddp (as `run` would submit them)."""
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1")
    app = dist.ddp(
        "train.py",
        image="pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
        nnodes="2",
        nproc_per_node="2",
        env={"HF_TOKEN": "hf_from_the_secret"},
    )
    with get_runner("sim") as runner:
        info = runner.dryrun(
            app,
            "kubernetes",
            {"kubeconfig": str(kubeconfig), "namespace": "team", "rdzv_port": port, **cfg},
        )
    return list(info.request.resources)


def check_all_reduce(
    results: list[Any], job: dict[str, Any], port: int, master: str | None = None
) -> None:
    """4 ranks of 2 pods summed 1+2+3+4, each with torchrun's env and its pod's identity
    (master: MASTER_ADDR:MASTER_PORT when not rank 0's DNS name and the rdzv_port)."""
    assert len(results) == 4, results
    assert {r["sum"] for r in results} == {10.0}  # 1+2+3+4 across both pods
    envs = sorted((r["env"] for r in results), key=lambda e: int(e["RANK"]))
    name, subdomain = job["metadata"]["name"], job["spec"]["template"]["spec"]["subdomain"]
    for rank, e in enumerate(envs):
        assert e["RANK"] == str(rank) and e["WORLD_SIZE"] == "4"
        assert e["LOCAL_RANK"] == str(rank % 2) and e["LOCAL_WORLD_SIZE"] == "2"
        assert e["GROUP_RANK"] == e["TRAINLAUNCH_REPLICA_ID"] == str(rank // 2)
        assert e["JOB_COMPLETION_INDEX"] == str(rank // 2)
        rank0 = master or f"{name}-0.{subdomain}.team.svc:{port}"
        assert f"{e['MASTER_ADDR']}:{e['MASTER_PORT']}" == rank0
        assert e["TRAINLAUNCH_METRICS_PATH"] == "/tmp/trainlaunch/metrics/"
        assert e["TRAINLAUNCH_SEED"] and e["TORCHELASTIC_RUN_ID"]
        assert e["HF_TOKEN"] == "hf_from_the_secret"  # through its secretKeyRef
    assert {r["host"] for r in results} == {f"{name}-{k}" for k in (0, 1)}


@pytest.mark.slow
def test_two_pods_of_a_stock_image_all_reduce(
    image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    port = free_port()
    docs = ddp_dryrun(tmp_path, port)
    assert [d["kind"] for d in docs] == ["Job", "ConfigMap", "Secret", "Service"]
    check_all_reduce(run_pods(docs, docs[0], image, tmp_path / "pods"), docs[0], port)


@pytest.mark.slow
def test_a_jobsets_two_pods_all_reduce(
    image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """api=jobset: the child Job the JobSet controller makes; its pods <js>-<role>-0-<k>,
    resolvable under the JobSet's own headless Service, rank 0 at <js>-<role>-0-0.<js>."""
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    port = free_port()
    docs = ddp_dryrun(tmp_path, port, api="jobset")
    assert [d["kind"] for d in docs] == ["JobSet", "ConfigMap", "Secret"]
    js = {**docs[0], "metadata": {**docs[0]["metadata"], "uid": "jobset-uid"}}
    (job,), service = jobset_children(js)
    name = js["metadata"]["name"]
    assert job["metadata"]["name"] == f"{name}-train-0" and service is not None
    assert service["metadata"]["name"] == job["spec"]["template"]["spec"]["subdomain"] == name
    results = run_pods(docs, job, image, tmp_path / "pods")
    check_all_reduce(results, job, port)
    assert {r["env"]["TRAINLAUNCH_RANK0_HOST"] for r in results} == {
        f"{name}-train-0-0.{name}.team.svc"
    }


@pytest.mark.slow
def test_a_trainjobs_two_pods_all_reduce(
    image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """api=trainjob on trainlaunch's ClusterTrainingRuntime: the JobSet Trainer makes of it,
    then its child Job; the trainer runs as the runtime's 'node' with Trainer's PET_* too."""
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    port = free_port()
    docs = ddp_dryrun(tmp_path, port, api="trainjob", runtime="trainlaunch")
    assert [d["kind"] for d in docs] == ["TrainJob", "ConfigMap", "Secret"]
    tj = {**docs[0], "metadata": {**docs[0]["metadata"], "uid": "trainjob-uid"}}
    js = trainjob_jobset(tj, runtime_manifest())
    js["metadata"]["uid"] = "jobset-uid"
    (job,), _ = jobset_children(js)
    name = tj["metadata"]["name"]
    assert job["metadata"]["name"] == f"{name}-node-0"
    results = run_pods(docs, job, image, tmp_path / "pods")
    # Trainer's torch plugin sets PET_MASTER_ADDR/PORT (rank 0's pod, its port 29500), which
    # the agent reads as torchrun does: for the options the command line does not give
    check_all_reduce(results, job, port, master=f"{name}-node-0-0.{name}:29500")
    assert {r["env"]["PET_NNODES"] for r in results} == {"2"}
    assert {r["env"]["TRAINLAUNCH_RANK0_HOST"] for r in results} == {
        f"{name}-node-0-0.{name}.team.svc"
    }


@pytest.mark.slow
def test_a_point_of_a_max_parallel_sweep_runs_its_own_ddp(
    image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Index 1 of a --max-parallel sweep's Indexed Job: point 1's seed, itself as rank 0."""
    from trainlaunch.settings import RankSettings
    from trainlaunch.sweeps import grammar as sweeps
    from trainlaunch.sweeps import runs as sweep_runs

    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1")
    port = free_port()
    cfg = {
        "kubeconfig": str(kubeconfig),
        "namespace": "team",
        "rdzv_port": port,
        "server_version": "1.29",
    }
    args = ["--image", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"]
    args += ["--nproc_per_node", "2", "train.py"]
    with get_runner("sim") as runner:
        plan = sweep_runs.plan_sweep(
            runner, "dist.ddp", args, sweeps.expand([], (11, 22)), "kubernetes", cfg,
            RankSettings(), max_parallel=1,
        )  # fmt: skip
    assert plan.array is not None, plan.array_note
    docs = list(plan.array.request.resources)
    job = next(d for d in docs if d["kind"] == "Job")
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (2, 1)
    root = tmp_path / "pods"
    root.mkdir()
    pod = start_pod(docs, job, 1, image, root)
    try:
        pod.wait(timeout=180)
    finally:
        if pod.poll() is None:
            os.killpg(pod.pid, 9)
            pod.wait()
    log = (root / f"{job['metadata']['name']}-1.log").read_text()
    assert pod.returncode == 0, log
    results = [json.loads(x.split("RESULT ", 1)[1]) for x in log.splitlines() if "RESULT " in x]
    assert len(results) == 2 and {r["sum"] for r in results} == {3.0}, log  # 1+2: its own ranks
    own_host = (
        f"{job['metadata']['name']}-1.{job['spec']['template']['spec']['subdomain']}.team.svc"
    )
    for r in results:
        e = r["env"]
        assert e["TRAINLAUNCH_SEED"] == "22" and e["JOB_COMPLETION_INDEX"] == "1"
        assert e["TRAINLAUNCH_REPLICA_ID"] == e["GROUP_RANK"] == "0" and e["WORLD_SIZE"] == "2"
        assert e["TRAINLAUNCH_RANK0_HOST"] == own_host  # not point 0's pod
        assert e["TRAINLAUNCH_APP_ID"] == f"{plan.array.app_id}:1"
