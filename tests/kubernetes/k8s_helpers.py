"""Helpers shared by the Kubernetes backend tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.inprocess import environment, main_in_process
from trainlaunch.specs import AppDef, Resource, Role

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "kubernetes"
TOKEN = "fake-token-1234"


def write_kubeconfig(path: Path, server: str, namespace: str | None = "team") -> Path:
    """A kubeconfig whose current context 'fake' talks to server with a bearer token."""
    ns = f"\n    namespace: {namespace}" if namespace else ""
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: {server}
users:
- name: tester
  user:
    token: {TOKEN}
contexts:
- name: fake
  context:
    cluster: fake
    user: tester{ns}
- name: other
  context:
    cluster: fake
    user: tester
current-context: fake
""")
    return path


def echo_app(replicas: int = 2, **role: object) -> AppDef:
    """A one-role app that prints its replica id."""
    fields: dict[str, object] = {
        "name": "echo",
        "entrypoint": "python",
        "args": ("-c", "import os; print('replica', os.environ['TRAINLAUNCH_REPLICA_ID'])"),
        "image": "python:3.11-slim",
        "num_replicas": replicas,
        "resource": Resource(cpu=1, gpu=0, memMB=256),
    }
    fields.update(role)
    return AppDef("echo", (Role(**fields),))  # type: ignore[arg-type]


def kubelet_expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion (k8s third_party/forked/golang/expansion)."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
            elif nxt == "(" and ")" in text[i + 2 :]:
                end = text.index(")", i + 2)
                name = text[i + 2 : end]
                out.append(env.get(name, f"$({name})"))
                i = end + 1
            else:
                out.append("$" + nxt)
                i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def cli(
    tmp_path: Path, *args: str, kubeconfig: Path | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`trainlaunch ARGS` with a private home, no config file and KUBECONFIG set (default: a
    kubeconfig for a server that is not there, namespace 'team'). In-process (tests/inprocess.py):
    the callers dry-run or read, they start no process."""
    if kubeconfig is None:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig-cli", "https://127.0.0.1:1")
    env = {
        **os.environ,
        "TRAINLAUNCH_HOME": str(tmp_path / "home"),
        "TRAINLAUNCH_CONFIG": "",
        "KUBECONFIG": str(kubeconfig),
    }
    with environment(env, cwd or Path.cwd()):
        return main_in_process(args)
