"""Names: the app's (a DNS label plus a random suffix), its Jobs', and label values."""

from __future__ import annotations

import re

from trainlaunch.errors import UsageError
from trainlaunch.schedulers.kubernetes.syntax import is_label_value
from trainlaunch.specs import AppDef

BACKEND = "kubernetes"
TRAINJOB_NODE = "node"  # the replicated job and container Kubeflow Trainer runs the trainer as
MAX_APP_BASE = 22  # leaves room for '-' + suffix + '-' + role + '-' + index within 63


def dns_label(text: str, max_len: int = 63) -> str:
    """Lower-case text squeezed into an RFC 1123 label of at most max_len characters."""
    label = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return label[:max_len].rstrip("-")


def app_name(name: str, suffix: str) -> str:
    """The unique app name: the AppDef's name as a DNS-1035 label plus a random suffix."""
    base = dns_label(name, MAX_APP_BASE) or "app"
    if not base[0].isalpha():  # Service names (DNS-1035) must start with a letter
        base = ("tl-" + base)[:MAX_APP_BASE].rstrip("-")
    return f"{base}-{suffix}"


def role_labels(app: AppDef, name: str, api: str = "job") -> dict[str, str]:
    """Role name -> its label (the role part of its names, a DNS label), short enough that the
    longest pod name the target makes from it is a valid label (webhooks check the same)."""
    out: dict[str, str] = {}
    for role in app.roles:
        index = len(str(role.num_replicas - 1))
        # job: <name>-<role>-<k>; jobset: <name>-<role>-0-<k>-<5 random> (the JobSet webhook
        # requires a DNS-1035 pod name); a TrainJob's only role runs as the runtime's 'node'
        budget = 63 - len(name) - 2 - index - (8 if api == "jobset" else 0)
        label = dns_label(role.name, budget) or "r"
        if label in out.values():
            raise UsageError(
                f"roles of app {app.name!r} collide as Kubernetes name {name}-{label!r}; "
                "rename one so they differ in letters or digits"
            )
        out[role.name] = label
    return out


def job_name(api: str, name: str, label: str) -> str:
    """The Job that runs a role's pods: its pods are ``<job>-<k>``."""
    if api == "job":
        return f"{name}-{label}"
    # a JobSet's (and a TrainJob's JobSet's) Job of replicated job R, replica 0
    return f"{name}-{TRAINJOB_NODE if api == 'trainjob' else label}-0"


def subdomain(api: str, name: str, label: str) -> str:
    """The headless Service a role's pods resolve under (JobSet names it after itself)."""
    return f"{name}-{label}" if api == "job" else name


def rank0_host(api: str, name: str, label: str, namespace: str) -> str:
    """The DNS name of replica 0 of the role with this label."""
    return f"{job_name(api, name, label)}-0.{subdomain(api, name, label)}.{namespace}.svc"


def session_label(session: str) -> str:
    """The session as a label value (list rebuilds handles from it)."""
    return session if session and is_label_value(session) else dns_label(session) or "default"
