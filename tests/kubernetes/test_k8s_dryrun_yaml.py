"""Every Kubernetes dry run parses as YAML and holds objects an API server would take.

`run --dryrun` shows drawn values as placeholders and masks secrets; both used to be pasted
into the finished YAML, so ``name: <app-id: assigned at submission>-train`` (a plain scalar
with ': ' inside) broke every YAML tool on line 4, and ``value: ********`` is an alias. Now
every string is substituted before the YAML is written and the name stays a valid name
(``<base>-xxxxx``, said in a comment). Here: the CLI's dry runs of each target, as text and
as --json, the sweep dry runs, and the golden files, each through ``yaml.safe_load_all``,
trainlaunch's own checks and the schemas (k8s_schemas.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from k8s_cases import STOCK_IMAGE
from k8s_helpers import GOLDEN, cli
from k8s_schemas import assert_valid_text

SECRET = "hf_s3cr3t-value"


APPS = {
    "echo": [
        "utils.sh",
        "--image",
        "busybox",
        "--num_replicas",
        "2",
        "echo $TRAINLAUNCH_REPLICA_ID",
    ],
    "ddp": [
        "dist.ddp",
        "--image",
        STOCK_IMAGE,
        "--nnodes",
        "2",
        "--nproc_per_node",
        "2",
        "train.py",
    ],
}


@pytest.mark.parametrize("api", ["job", "jobset", "trainjob"])
@pytest.mark.parametrize("app", sorted(APPS))
def test_run_dryrun_is_valid_yaml_of_valid_objects(tmp_path: Path, api: str, app: str) -> None:
    component, *args = APPS[app]
    cfg = f"api={api},queue=team-queue"
    out = cli(tmp_path, "run", "-s", "k8s", "--cfg", cfg, "--dryrun", component,
              "--env", f"HF_TOKEN={SECRET},MODE=fast", *args)  # fmt: skip
    assert out.returncode == 0, out.stderr
    docs = assert_valid_text(out.stdout)
    first = docs[0]
    assert first["kind"] == {"job": "Job", "jobset": "JobSet", "trainjob": "TrainJob"}[api]
    assert first["metadata"]["name"].startswith(f"{'sh' if app == 'echo' else 'train'}-xxxxx")
    assert SECRET not in out.stdout and SECRET not in out.stderr
    assert "kind: Secret" in out.stdout  # the secret has its own object
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"# trainlaunch: {len(docs)} objects for Kubernetes (api={api})")
    assert any("xxxxx stands for the app's name, drawn at submission" in x for x in lines[:5])
    assert any("hides a secret value" in x for x in lines[:5])
    seed = [e for e in _envs(first) if e["name"] == "TRAINLAUNCH_SEED"]
    assert seed and seed[0]["value"] == "<seed: drawn at submission>"


def test_run_dryrun_json_request_is_valid_yaml(tmp_path: Path) -> None:
    out = cli(tmp_path, "run", "-s", "k8s", "--cfg", "api=jobset", "--dryrun", "--json",
              *APPS["echo"][:1], "--env", f"DB_PASSWORD={SECRET}", *APPS["echo"][1:])  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert_valid_text(doc["request"])
    assert SECRET not in out.stdout and doc["app_id"] == "team:<app-id: assigned at submission>"


def test_show_secrets_shows_them_in_the_secret_only(tmp_path: Path) -> None:
    out = cli(tmp_path, "run", "-s", "k8s", "--dryrun", "--show-secrets", *APPS["echo"][:1],
              "--env", f"HF_TOKEN={SECRET}", *APPS["echo"][1:])  # fmt: skip
    docs = assert_valid_text(out.stdout)
    holders = [d["kind"] for d in docs if SECRET in json.dumps(d)]
    assert holders == ["Secret"], holders


@pytest.mark.parametrize("max_parallel", [None, 2])
def test_sweep_dryruns_are_valid_yaml(tmp_path: Path, max_parallel: int | None) -> None:
    limit = ["--max-parallel", str(max_parallel)] if max_parallel else []
    out = cli(tmp_path, "sweep", "-s", "k8s", "--param", "x=1,2", *limit, "--dryrun",
              "utils.sh", "--image", "busybox", "echo {x}")  # fmt: skip
    assert out.returncode == 0, out.stderr
    docs = assert_valid_text(out.stdout)
    assert [d["kind"] for d in docs] == (["Job", "Service"] * (1 if max_parallel else 2))


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.yaml")), ids=lambda p: p.stem)
def test_golden_files_are_valid_yaml(path: Path) -> None:
    oldest = (1, 33) if path.stem == "ddp_all_options" else (1, 29)  # its server_version
    assert_valid_text(path.read_text(), oldest)


def _envs(doc: dict[str, object]) -> list[dict[str, str]]:
    """The env of the first container of a Job, JobSet or TrainJob."""
    from trainlaunch.schedulers.kubernetes.targets import role_views

    view = role_views(doc)[0]
    return view["spec"]["template"]["spec"]["containers"][0]["env"]  # type: ignore[no-any-return]
