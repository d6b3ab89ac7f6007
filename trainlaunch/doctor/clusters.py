"""Slurm and Kubernetes, when this machine is set up for them: reachable, and allowed to run
what trainlaunch submits."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Mapping
from typing import Any

from trainlaunch.doctor.values import Check, fail, ok, warn
from trainlaunch.errors import SchedulerError, UsageError

# What the Kubernetes backend does: (verb, API group, resource, subresource)
K8S_NEEDS = (
    ("create", "batch", "jobs", ""),
    ("list", "batch", "jobs", ""),
    ("delete", "batch", "jobs", ""),
    ("create", "", "services", ""),
    ("delete", "", "services", ""),
    ("create", "", "configmaps", ""),
    ("delete", "", "configmaps", ""),
    ("create", "", "secrets", ""),  # --env secrets go into a Secret on every target
    ("delete", "", "secrets", ""),
    ("list", "", "pods", ""),
    ("get", "", "pods", "log"),
)
# What --cfg api=jobset|trainjob adds: the target's own kind (docs/kubernetes.md, Permissions)
K8S_TARGET_NEEDS = {
    target: tuple((verb, group, resource, "") for verb in ("create", "get", "list", "delete"))
    for target, group, resource in (
        ("jobset", "jobset.x-k8s.io", "jobsets"),
        ("trainjob", "trainer.kubeflow.org", "trainjobs"),
    )
}


def k8s_needs(cfg: Mapping[str, Any]) -> tuple[tuple[str, str, str, str], ...]:
    """What the backend does with these options: the core kinds, then the target's kind."""
    return (*K8S_NEEDS, *K8S_TARGET_NEEDS.get(str(cfg.get("api") or "job"), ()))


def slurm_configured(environ: Mapping[str, str], default_scheduler: str) -> bool:
    """Slurm's commands are here, SLURM_CONF names a cluster, or the config defaults to it."""
    return bool(shutil.which("sinfo") or environ.get("SLURM_CONF")) or default_scheduler == "slurm"


def slurm(environ: Mapping[str, str]) -> list[Check]:
    """``scontrol ping`` (is slurmctld up), then ``sinfo`` (which nodes can take jobs)."""
    from trainlaunch.schedulers.slurm.backend import last_line, run_slurm

    conf = environ.get("SLURM_CONF") or "the default slurm.conf"
    try:
        ping = run_slurm(["scontrol", "ping"], check=False, timeout=30)
    except SchedulerError as e:
        return [fail("slurm", e.message, e.hint or "install the Slurm client commands")]
    answer = " ".join(ping.stdout.split("\n")[0].split()) or last_line(ping.stderr)
    if ping.returncode != 0 or " UP" not in ping.stdout:
        return [
            fail(
                "slurm",
                f"{answer or 'no answer'} ({conf})",
                "is slurmctld running, and SLURM_CONF the cluster's config? (scontrol ping)",
            )
        ]
    out = [ok("slurm", f"{answer} ({conf})")]
    try:
        nodes = run_slurm(["sinfo", "-h", "-o", "%D %t"], timeout=30)
    except SchedulerError as e:
        return [*out, fail("slurm nodes", e.message, e.hint or "sinfo")]
    states: dict[str, int] = {}
    for line in nodes.stdout.splitlines():
        n, _, state = line.partition(" ")
        if n.isdigit():
            states[state.strip()] = states.get(state.strip(), 0) + int(n)
    usable = sum(
        n for s, n in states.items() if s.rstrip("*~#$@") in ("idle", "mix", "alloc", "comp")
    )
    shown = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none"
    if not usable:
        return [*out, fail("slurm nodes", shown, "no node can take jobs: sinfo -R says why")]
    return [*out, ok("slurm nodes", shown)]


def kubernetes_configured(
    environ: Mapping[str, str], default_scheduler: str, cfg: Mapping[str, Any]
) -> bool:
    """A kubeconfig exists (or the config names one), we run in a pod, or it is the default."""
    from trainlaunch.schedulers.kubernetes.client import kubeconfig_files

    files = kubeconfig_files(str(cfg["kubeconfig"]) if cfg.get("kubeconfig") else None)
    return (
        any(f.is_file() for f in files)
        or bool(environ.get("KUBERNETES_SERVICE_HOST"))
        or default_scheduler == "kubernetes"
        or bool(cfg)
    )


def kubernetes(cfg: Mapping[str, Any]) -> list[Check]:
    """The kube context and namespace, the API server's answer, and RBAC for what we submit."""
    from trainlaunch.schedulers.kubernetes.client import INSTALL_HINT, connect, resolve_context

    if importlib.util.find_spec("kubernetes") is None:
        return [warn("kubernetes", "a kubeconfig is here, the client is not", INSTALL_HINT)]
    kubeconfig = str(cfg["kubeconfig"]) if cfg.get("kubeconfig") else None
    context = str(cfg["context"]) if cfg.get("context") else None
    try:
        name, ns = resolve_context(kubeconfig, context)
    except UsageError as e:
        return [fail("kube context", e.message, e.hint or "kubectl config get-contexts")]
    ns = str(cfg.get("namespace") or ns)
    out = [ok("kube context", f"{name or 'in-cluster service account'}, namespace {ns}")]
    try:
        api = connect(kubeconfig, context)
    except SchedulerError as e:
        return [*out, fail("kube api", e.message, e.hint or "")]
    try:
        out.append(ok("kube api", f"{api.host}: Kubernetes {api.server_version()}"))
        denied = [
            f"{verb} {resource}{'/' + sub if sub else ''}{'.' + group if group else ''}"
            for verb, group, resource, sub in k8s_needs(cfg)
            if not api.can_i(verb, resource, ns, group, sub)
        ]
    except SchedulerError as e:
        return [*out, fail("kube api", e.message, e.hint or "")]
    finally:
        api.close()
    if denied:
        out.append(
            fail(
                "kube rbac",
                f"namespace {ns}: may not {', '.join(denied)}",
                "ask for a Role with these verbs in the namespace "
                f"(kubectl auth can-i {denied[0].split()[0]} {denied[0].split()[1]} -n {ns})",
            )
        )
    else:
        out.append(ok("kube rbac", f"may submit, read and delete apps in namespace {ns}"))
    return out
