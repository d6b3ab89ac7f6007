"""Semantic checks on rendered manifests: what the API server rejects but no OpenAPI schema says.

The schema (tested with ``kubernetes-validate``) knows field names and types; it accepts
``Bad_Name.UPPER`` as a name, ``restartPolicy: Always`` in a Job, ``memory: lots``, and a Job
whose pods' hostnames exceed 63 characters. These checks run on every dryrun, so such a mistake
is a usage error before anything reaches a cluster.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from trainlaunch.schedulers.kubernetes import trainjob
from trainlaunch.schedulers.kubernetes.job_checks import (
    check_configmap,
    check_job,
    check_meta,
    check_secret,
    check_service,
)
from trainlaunch.schedulers.kubernetes.syntax import (
    DNS_1035,
    is_dns_1035,
    is_dns_subdomain,
    is_qualified_name,
)

Doc = dict[str, Any]
_RULE_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_,:")
_JOB_FAILURE_REASONS = frozenset(  # what JobSet's webhook accepts in onJobFailureReasons
    {
        "BackoffLimitExceeded",
        "DeadlineExceeded",
        "FailedIndexes",
        "MaxFailedIndexesExceeded",
        "PodFailurePolicy",
    }
)
_JOBSET_ACTIONS = frozenset({"FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"})
_POD_SUFFIX = "-abcde"  # the 5 random characters of a pod name, as JobSet's webhook counts


def check_manifests(docs: list[Doc]) -> list[str]:
    """Every problem found, as ``Kind/name: what`` lines (empty when all is well)."""
    services = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Service"}
    configmaps = {d["metadata"]["name"] for d in docs if d.get("kind") == "ConfigMap"}
    secrets = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Secret"}
    problems: list[str] = []
    for doc in docs:
        where = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        problems += [f"{where}: {p}" for p in _check_doc(doc, services)]
        for pod in _pods(doc):  # a pod waits forever for what nobody creates
            problems += [f"{where}: {p}" for p in _check_refs(pod, configmaps, secrets)]
    return problems


def _pods(doc: Doc) -> list[Mapping[str, Any]]:
    """The pod specs of a Job, JobSet or TrainJob."""
    if doc.get("kind") == "Job":
        return [doc["spec"].get("template", {}).get("spec", {})]
    if doc.get("kind") == "JobSet":
        return [
            rj.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
            for rj in doc["spec"].get("replicatedJobs", [])
        ]
    if doc.get("kind") == "TrainJob":
        return [v["spec"]["template"]["spec"] for v in trainjob.role_views(doc)]
    return []


def _check_refs(
    pod: Mapping[str, Any], configmaps: set[str], secrets: Mapping[str, Mapping[str, Any]]
) -> Iterator[str]:
    """The ConfigMaps and Secret keys a pod needs are objects of this app."""
    for v in pod.get("volumes", []):
        name = (v.get("configMap") or {}).get("name")
        if name is not None and name not in configmaps:
            yield f"volume {v.get('name')!r} needs ConfigMap {name!r}"
    for c in pod.get("containers", []):
        for e in c.get("env", []):
            ref = (e.get("valueFrom") or {}).get("secretKeyRef")
            if ref is None:
                continue
            secret = secrets.get(ref.get("name"))
            if secret is None or ref.get("key") not in (secret.get("stringData") or {}):
                yield f"env {e.get('name')!r} needs key {ref.get('key')!r} of Secret {ref.get('name')!r}"


def _check_doc(doc: Doc, services: Mapping[str, Doc]) -> Iterator[str]:
    meta = doc.get("metadata", {})
    kind = doc.get("kind")
    yield from check_meta(meta)
    if kind == "Job":
        yield from check_job(meta, doc.get("spec", {}), services)
    elif kind == "Service":
        if not DNS_1035.match(meta.get("name", "")) or len(meta.get("name", "")) > 63:
            yield f"Service name {meta.get('name')!r} is not an RFC 1035 label"
        yield from check_service(doc.get("spec", {}))
    elif kind == "ConfigMap":
        yield from check_configmap(doc)
    elif kind == "Secret":
        yield from check_secret(doc)
    elif kind == "JobSet":
        yield from _check_jobset(meta, doc.get("spec", {}))
    elif kind == "TrainJob":
        yield from _check_trainjob(doc)
    else:
        yield f"unexpected kind {kind!r}"


def _check_jobset(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[str]:
    """What JobSet's webhook refuses (v0.12: pkg/webhooks/jobset_webhook.go), and our rules."""
    name = meta.get("name", "")
    if not is_dns_1035(name):
        yield f"JobSet name {name!r} is not an RFC 1035 label (it names the headless Service)"
    if (spec.get("network") or {}).get("enableDNSHostnames") is not True:
        yield "network.enableDNSHostnames must be true: ranks resolve each other by pod name"
    names: set[str] = set()
    for rj in spec.get("replicatedJobs", []):
        rname, replicas = rj.get("name", ""), rj.get("replicas", 1)
        names.add(rname)
        job = f"{name}-{rname}-{replicas - 1}"
        if not is_dns_1035(job):
            yield f"replicated job {rname!r}: Job name {job!r} is not an RFC 1035 label"
        job_spec = (rj.get("template") or {}).get("spec", {})
        last_pod = f"{job}-{int(job_spec.get('completions') or 1) - 1}{_POD_SUFFIX}"
        if not is_dns_1035(last_pod):
            yield f"replicated job {rname!r}: pod name {last_pod!r} would exceed 63 characters"
        child = {"name": f"{name}-{rname}-0", **((rj.get("template") or {}).get("metadata") or {})}
        yield from check_job(child, job_spec, None)  # JobSet makes the Service
    for rule in (spec.get("failurePolicy") or {}).get("rules", []):
        rule_name = rule.get("name", "")
        if not (
            rule_name[:1].isalpha() and set(rule_name) <= _RULE_NAME_CHARS and len(rule_name) <= 128
        ):
            yield f"failure policy rule name {rule_name!r} is not valid"
        if rule.get("action") not in _JOBSET_ACTIONS:
            yield f"failure policy action {rule.get('action')!r} is not one of {sorted(_JOBSET_ACTIONS)}"
        for reason in rule.get("onJobFailureReasons", []):
            if reason not in _JOB_FAILURE_REASONS:
                yield f"failure policy reason {reason!r} is not a Job failure reason"
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs", []):
        if target not in names:
            yield f"successPolicy names replicated job {target!r}, which does not exist"


def _check_trainjob(doc: Doc) -> Iterator[str]:
    """What Trainer's CEL rules and webhook refuse (v2.3), and our rules."""
    meta, spec = doc.get("metadata", {}), doc.get("spec", {})
    name = meta.get("name", "")
    if not is_dns_1035(name):
        yield f"TrainJob name {name!r} is not an RFC 1035 label"
    if not is_dns_subdomain((spec.get("runtimeRef") or {}).get("name", "")):
        yield "runtimeRef.name must name a ClusterTrainingRuntime"
    for patch in spec.get("runtimePatches", []):
        if not is_qualified_name(patch.get("manager", "")) or "/" not in patch.get("manager", ""):
            yield f"runtime patch manager {patch.get('manager')!r} is not a domain-prefixed path"
    trainer = spec.get("trainer") or {}
    reserved = sorted(trainjob.RESERVED_ENV & {e.get("name") for e in trainer.get("env", [])})
    if reserved:
        yield f"trainer.env must not set {', '.join(reserved)} (Trainer's torch plugin does)"
    for view in trainjob.role_views(doc):  # the trainer's pods, as the JobSet will make them
        n = int(view["spec"]["completions"])
        last_pod = f"{view['metadata']['name']}-{n - 1}{_POD_SUFFIX}"
        if not is_dns_1035(last_pod):
            yield f"pod name {last_pod!r} would exceed 63 characters"
        yield from check_job(view["metadata"], view["spec"], None, restart_policy=False)
