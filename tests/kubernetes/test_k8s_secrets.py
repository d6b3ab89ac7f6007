"""`--env` secrets on Kubernetes: in a Secret the app owns, referenced by secretKeyRef, masked in
the role annotation, nowhere else (rendered, on the wire and after `stop`)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from k8s_fake_apiserver import FakeApiServer
from k8s_helpers import echo_app
from k8s_schemas import assert_valid

from trainlaunch.cli.redact import redact_env
from trainlaunch.errors import UsageError
from trainlaunch.schedulers.kubernetes.backend import KubernetesScheduler
from trainlaunch.schedulers.kubernetes.names import app_name
from trainlaunch.schedulers.kubernetes.options import RenderOptions
from trainlaunch.schedulers.kubernetes.render import render_app, role_from_job
from trainlaunch.schedulers.kubernetes.targets import role_views
from trainlaunch.settings import SECRET_MASK
from trainlaunch.specs import AppDef

TOKEN = "hf_0123456789abcdef"
ENV = {
    "HF_TOKEN": TOKEN,
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
    "DB_PASSWORD": "pw-value",
    "OPENAI_API_KEY": "sk-value",
    "MY_CREDENTIALS": "cred-value",
    "MODE": "fast",
    "EPOCHS": "3",
}


def render(app: AppDef, **cfg: Any) -> list[dict[str, Any]]:
    resolved = KubernetesScheduler("s").run_opts().resolve({"namespace": "team", **cfg})
    return render_app(
        app, app_name(app.name, "abcde"), "s", RenderOptions.from_cfg(resolved, "team")
    )


def env_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    view = role_views(doc)[0]
    return {e["name"]: e for e in view["spec"]["template"]["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize("api", ["job", "jobset", "trainjob"])
def test_secrets_are_in_the_secret_only(api: str) -> None:
    docs = render(echo_app(2, env=ENV), api=api)
    secret = next(d for d in docs if d["kind"] == "Secret")
    hidden = {k for k, v in redact_env(ENV).items() if v == SECRET_MASK}  # the CLI's rule
    assert set(secret["stringData"]) == hidden == set(ENV) - {"MODE", "EPOCHS"}
    assert secret["stringData"]["HF_TOKEN"] == TOKEN
    env = env_of(docs[0])
    for name in hidden:
        assert env[name] == {
            "name": name,
            "valueFrom": {"secretKeyRef": {"name": "echo-abcde-env", "key": name}},
        }
    assert env["MODE"] == {"name": "MODE", "value": "fast"}
    for doc in docs:  # the values are nowhere else: not in the pod spec, not in annotations
        if doc["kind"] != "Secret":
            text = json.dumps(doc)
            assert not any(ENV[k] in text for k in hidden), doc["kind"]
    role = role_from_job(role_views(docs[0])[0])
    assert role is not None and role.env["HF_TOKEN"] == SECRET_MASK and role.env["MODE"] == "fast"
    assert_valid(docs)


def test_roles_that_disagree_get_their_own_key() -> None:
    a = echo_app(1, name="a", env={"HF_TOKEN": "one", "WANDB_API_KEY": "same"}).roles[0]
    b = a.replace(name="b", env={"HF_TOKEN": "two", "WANDB_API_KEY": "same"})
    docs = render(AppDef("two", (a, b)))
    secret = next(d for d in docs if d["kind"] == "Secret")
    assert secret["stringData"] == {"HF_TOKEN": "one", "WANDB_API_KEY": "same", "b.HF_TOKEN": "two"}
    jobs = [d for d in docs if d["kind"] == "Job"]
    assert env_of(jobs[1])["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "b.HF_TOKEN"
    assert [d["kind"] for d in docs] == ["Job", "Secret", "Service", "Job", "Service"]


def test_a_secret_per_replica_is_refused() -> None:
    with pytest.raises(UsageError, match=r"secret variable HF_TOKEN uses \$\{replica_id\}"):
        render(echo_app(2, env={"HF_TOKEN": "tok-${replica_id}"}))


@pytest.mark.parametrize("api", ["job", "jobset", "trainjob"])
def test_on_the_wire_the_secret_follows_its_owner_and_goes_with_it(
    k8s: KubernetesScheduler, fake_api: FakeApiServer, api: str
) -> None:
    info = k8s.submit_dryrun(echo_app(2, env=ENV), k8s.run_opts().resolve({"api": api}, "k8s"))
    app_id = k8s.schedule(info)
    posts = [r for r in fake_api.requests if r.method == "POST"]
    kinds = [r.body["kind"] for r in posts]
    assert kinds[:2] == [{"job": "Job", "jobset": "JobSet", "trainjob": "TrainJob"}[api], "Secret"]
    owner_doc = posts[0].body
    assert TOKEN not in json.dumps(owner_doc)  # nothing of it reaches the Job (JobSet, ...)
    plural = {"job": "jobs", "jobset": "jobsets", "trainjob": "trainjobs"}[api]
    owner = fake_api.get(plural, "team", owner_doc["metadata"]["name"])
    assert owner is not None
    assert posts[1].body["metadata"]["ownerReferences"] == [
        {
            "apiVersion": owner_doc["apiVersion"],
            "kind": owner_doc["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
        }
    ]
    name = app_id.split(":")[1]
    stored = fake_api.get("secrets", "team", f"{name}-env")
    assert stored is not None and base64.b64decode(stored["data"]["HF_TOKEN"]).decode() == TOKEN
    resp = k8s.describe(app_id)
    assert resp.app is not None and resp.app.roles[0].env["HF_TOKEN"] == SECRET_MASK
    k8s.cancel(app_id)
    assert fake_api.names("secrets", "team") == []
    deletes = [r.path for r in fake_api.requests if r.method == "DELETE"]
    assert f"/api/v1/namespaces/team/secrets/{name}-env" in deletes


def test_deleting_the_job_deletes_the_secret(
    k8s: KubernetesScheduler, fake_api: FakeApiServer
) -> None:
    info = k8s.submit_dryrun(
        echo_app(1, env={"HF_TOKEN": TOKEN}), k8s.run_opts().resolve({}, "k8s")
    )
    name = k8s.schedule(info).split(":")[1]
    assert fake_api.names("secrets", "team") == [f"{name}-env"]
    # `kubectl delete job` (background): the garbage collector follows the owner reference
    fake_api.delete_cascading("jobs", "team", f"{name}-echo")
    assert fake_api.names("secrets", "team") == []


def test_max_parallel_points_share_their_secret_or_are_refused(
    kubeconfig: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainlaunch.runner import get_runner
    from trainlaunch.settings import RankSettings
    from trainlaunch.sweeps import grammar as sweeps
    from trainlaunch.sweeps import runs as sweep_runs

    monkeypatch.setenv("TRAINLAUNCH_HOME", str(tmp_path / "home"))
    cfg = {"kubeconfig": str(kubeconfig)}

    def plan(params: list[str]) -> Any:
        with get_runner("s") as runner:
            args = ["--image", "busybox", "--env", "HF_TOKEN={t}", "echo {x}"]
            return sweep_runs.plan_sweep(
                runner, "utils.sh", args, sweeps.expand([sweeps.parse_param(p) for p in params], (1,)),
                "kubernetes", cfg,
                RankSettings(), max_parallel=1,
            )  # fmt: skip

    shared = plan(["x=1,2", f"t={TOKEN}"])
    assert shared.array is not None, shared.array_note
    docs = list(shared.array.request.resources)
    assert [d["kind"] for d in docs] == ["Job", "Secret", "Service"]
    assert TOKEN not in json.dumps(docs[0])  # not in the points' script, not in annotations
    with pytest.raises(UsageError, match="differ in a secret variable's value"):
        plan(["x=1", f"t={TOKEN},other"])
