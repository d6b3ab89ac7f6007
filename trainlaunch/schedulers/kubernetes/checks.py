"""Semantic checks on rendered manifests: what the API server rejects but no OpenAPI schema says.

The schema (tested with ``kubernetes-validate``) knows field names and types; it accepts
``Bad_Name.UPPER`` as a name, ``restartPolicy: Always`` in a Job, ``memory: lots``, and a Job
whose pods' hostnames exceed 63 characters. These checks run on every dryrun, so such a mistake
is a usage error before anything reaches a cluster.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_PORT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_QUANTITY = re.compile(
    r"^([0-9]+(\.[0-9]+)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][-+]?[0-9]+)?$"
)
_FAILURE_ACTIONS = frozenset({"FailJob", "FailIndex", "Ignore", "Count"})
_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})
MAX_ANNOTATIONS_BYTES = 256 * 1024
MAX_CONFIGMAP_BYTES = 1024 * 1024  # data + decoded binaryData, as the API server counts
_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


SWEEP_POINTS = "trainlaunch.io/sweep-points"  # marks the Job of a --max-parallel sweep


def check_manifests(docs: list[dict[str, Any]]) -> list[str]:
    """Every problem found, as ``Kind/name: what`` lines (empty when all is well)."""
    services = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Service"}
    configmaps = {d["metadata"]["name"] for d in docs if d.get("kind") == "ConfigMap"}
    problems: list[str] = []
    for doc in docs:
        where = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        problems += [f"{where}: {p}" for p in _check_doc(doc, services)]
        if doc.get("kind") == "Job":  # a pod waits forever for a ConfigMap nobody creates
            for v in doc["spec"].get("template", {}).get("spec", {}).get("volumes", []):
                name = (v.get("configMap") or {}).get("name")
                if name is not None and name not in configmaps:
                    problems.append(f"{where}: volume {v.get('name')!r} needs ConfigMap {name!r}")
    return problems


def configmap_size(doc: Mapping[str, Any]) -> int:
    """Bytes a ConfigMap holds by the API server's count: data values + decoded binaryData."""
    size = sum(len(str(v).encode()) for v in (doc.get("data") or {}).values())
    for value in (doc.get("binaryData") or {}).values():
        try:
            size += len(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            size += len(value)
    return size


def _check_configmap(doc: Mapping[str, Any]) -> Iterator[str]:
    if not is_dns_subdomain(doc["metadata"].get("name", "")):
        yield f"ConfigMap name {doc['metadata'].get('name')!r} is not an RFC 1123 subdomain"
    for key, value in (doc.get("binaryData") or {}).items():
        if not _CONFIGMAP_KEY.match(key):
            yield f"key {key!r} must match [-._a-zA-Z0-9]+"
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            yield f"binaryData {key!r} is not base64"
    if (size := configmap_size(doc)) > MAX_CONFIGMAP_BYTES:
        yield f"holds {size} bytes, over the API server's limit of {MAX_CONFIGMAP_BYTES}"


def _check_doc(doc: dict[str, Any], services: Mapping[str, dict[str, Any]]) -> Iterator[str]:
    meta = doc.get("metadata", {})
    yield from _check_meta(meta)
    if doc.get("kind") == "Job":
        yield from _check_job(meta, doc.get("spec", {}), services)
    elif doc.get("kind") == "Service":
        if not _DNS_1035.match(meta.get("name", "")) or len(meta.get("name", "")) > 63:
            yield f"Service name {meta.get('name')!r} is not an RFC 1035 label"
        yield from _check_service(doc.get("spec", {}))
    elif doc.get("kind") == "ConfigMap":
        yield from _check_configmap(doc)
    else:
        yield f"unexpected kind {doc.get('kind')!r}"


def _check_meta(meta: Mapping[str, Any]) -> Iterator[str]:
    if not is_dns_label(meta.get("namespace", "")):
        yield f"namespace {meta.get('namespace')!r} is not an RFC 1123 label"
    yield from _check_labels(meta.get("labels") or {}, "label")
    annotations = meta.get("annotations") or {}
    for key in annotations:
        if not is_qualified_name(key):
            yield f"annotation key {key!r} is not a qualified name"
    if len(json.dumps(annotations).encode()) > MAX_ANNOTATIONS_BYTES:
        yield "annotations exceed 256 KiB"


def _check_labels(labels: Mapping[str, Any], what: str) -> Iterator[str]:
    for key, value in labels.items():
        if not is_qualified_name(key):
            yield f"{what} key {key!r} is not a qualified name"
        if not is_label_value(value):
            yield f"{what} {key}={value!r}: values are <= 63 letters, digits, '-', '_', '.'"


def _check_job(
    meta: Mapping[str, Any], spec: Mapping[str, Any], services: Mapping[str, dict[str, Any]]
) -> Iterator[str]:
    name = meta.get("name", "")
    n = spec.get("completions")
    if spec.get("completionMode") != "Indexed":
        yield "completionMode must be Indexed (replica ids come from the completion index)"
    if not isinstance(n, int) or n < 1:
        yield "an Indexed Job needs completions >= 1"
        return
    if SWEEP_POINTS in (meta.get("annotations") or {}):  # one point per index (sweep.py)
        if not isinstance(spec.get("parallelism"), int) or not 1 <= spec["parallelism"] <= n:
            yield "a sweep Job's parallelism (--max-parallel) must be in 1..completions"
        if "backoffLimitPerIndex" not in spec:
            yield "a sweep Job needs backoffLimitPerIndex: one point's failure ends only it"
    elif spec.get("parallelism") != n:
        yield "parallelism must equal completions: every replica runs at once"
    hostname = f"{name}-{n - 1}"
    if not is_dns_label(name) or len(hostname) > 63:
        yield f"pod hostname {hostname!r} must be an RFC 1123 label of <= 63 characters"
    for key in ("backoffLimit", "backoffLimitPerIndex", "maxFailedIndexes"):
        if key in spec and (not isinstance(spec[key], int) or spec[key] < 0):
            yield f"{key} must be an integer >= 0"
    for rule in (spec.get("podFailurePolicy") or {}).get("rules", []):
        if rule.get("action") not in _FAILURE_ACTIONS:
            yield f"podFailurePolicy action {rule.get('action')!r} is not one of {sorted(_FAILURE_ACTIONS)}"
        if rule.get("action") == "FailIndex" and "backoffLimitPerIndex" not in spec:
            yield "podFailurePolicy action FailIndex needs backoffLimitPerIndex"
    if spec.get("podReplacementPolicy") not in (None, "Failed", "TerminatingOrFailed"):
        yield f"podReplacementPolicy {spec.get('podReplacementPolicy')!r} is not Failed or TerminatingOrFailed"
    template = spec.get("template", {})
    pod_labels = template.get("metadata", {}).get("labels") or {}
    yield from _check_labels(pod_labels, "pod label")
    yield from _check_pod(template.get("spec", {}), pod_labels, services)


def _check_pod(
    pod: Mapping[str, Any], pod_labels: Mapping[str, str], services: Mapping[str, dict[str, Any]]
) -> Iterator[str]:
    if pod.get("restartPolicy") != "Never":
        yield "restartPolicy must be Never (the Job controller, not the kubelet, retries)"
    svc = services.get(pod.get("subdomain", ""))
    if svc is None:
        yield f"subdomain {pod.get('subdomain')!r} names no Service in this app"
    else:
        selector = svc.get("spec", {}).get("selector") or {}
        if not selector or any(pod_labels.get(k) != v for k, v in selector.items()):
            yield f"Service {svc['metadata']['name']} does not select this Job's pods"
    for key in ("serviceAccountName", "priorityClassName"):
        if key in pod and not is_dns_subdomain(pod[key]):
            yield f"{key} {pod[key]!r} is not an RFC 1123 subdomain"
    for secret in pod.get("imagePullSecrets", []):
        if not is_dns_subdomain(secret.get("name", "")):
            yield f"image pull secret {secret.get('name')!r} is not an RFC 1123 subdomain"
    yield from _check_labels(pod.get("nodeSelector") or {}, "nodeSelector")
    for t in pod.get("tolerations", []):
        if t.get("operator") == "Exists" and t.get("value"):
            yield f"toleration {t.get('key')!r}: operator Exists takes no value"
        if "effect" in t and t["effect"] not in _EFFECTS:
            yield f"toleration {t.get('key')!r}: effect {t['effect']!r} is not one of {sorted(_EFFECTS)}"
        if not is_qualified_name(t.get("key", "")):
            yield f"toleration key {t.get('key')!r} is not a qualified name"
    volumes = {v.get("name") for v in pod.get("volumes", [])}
    for v in pod.get("volumes", []):
        size = (v.get("emptyDir") or {}).get("sizeLimit")
        if size is not None and not is_quantity(size):
            yield f"volume {v.get('name')!r}: sizeLimit {size!r} is not a Kubernetes quantity"
        claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
        if claim is not None and not is_dns_subdomain(claim):
            yield f"volume {v.get('name')!r}: claim {claim!r} is not an RFC 1123 subdomain"
    names: set[str] = set()
    for c in pod.get("containers", []):
        if not is_dns_label(c.get("name", "")) or c["name"] in names:
            yield f"container name {c.get('name')!r} must be a unique RFC 1123 label"
        names.add(c.get("name", ""))
        yield from _check_container(c, volumes)


def _check_container(c: Mapping[str, Any], volumes: set[str | None]) -> Iterator[str]:
    if not c.get("image"):
        yield f"container {c.get('name')!r} has no image"
    seen: set[str] = set()
    for e in c.get("env", []):
        if not _ENV_NAME.match(e.get("name", "")) or e["name"] in seen:
            yield f"env name {e.get('name')!r} must be unique and match [-._a-zA-Z][-._a-zA-Z0-9]*"
        seen.add(e.get("name", ""))
        if ("value" in e) == ("valueFrom" in e):
            yield f"env {e.get('name')!r} needs exactly one of value and valueFrom"
    resources = c.get("resources") or {}
    for kind in ("requests", "limits"):
        for key, q in (resources.get(kind) or {}).items():
            if not is_quantity(q):
                yield f"{kind}.{key} {q!r} is not a Kubernetes quantity"
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    for key in sorted(requests):  # extended resources (nvidia.com/gpu) cannot be overcommitted
        if "/" in key and requests[key] != limits.get(key):
            yield f"extended resource {key}: requests must equal limits"
    yield from _check_ports(c.get("ports", []), "containerPort")
    paths: set[str] = set()
    for m in c.get("volumeMounts", []):
        if m.get("name") not in volumes:
            yield f"volumeMount {m.get('name')!r} names no volume"
        if m.get("mountPath") in paths:
            yield f"two volumes are mounted at {m.get('mountPath')!r}"
        paths.add(m.get("mountPath", ""))


def _check_service(spec: Mapping[str, Any]) -> Iterator[str]:
    if spec.get("clusterIP") != "None":
        yield "clusterIP must be None: a headless Service gives each pod a DNS name"
    if spec.get("publishNotReadyAddresses") is not True:
        yield "publishNotReadyAddresses must be true so rank 0 resolves before readiness"
    yield from _check_ports(spec.get("ports", []), "port")


def _check_ports(ports: list[dict[str, Any]], key: str) -> Iterator[str]:
    names: set[str] = set()
    numbers: set[int] = set()
    for p in ports:
        name, number = p.get("name", ""), p.get(key)
        if not is_port_name(name) or name in names:
            yield f"port name {name!r} must be unique, <= 15 lower-case letters, digits, '-'"
        if not isinstance(number, int) or not 1 <= number <= 65535 or number in numbers:
            yield f"port {number!r} must be a unique integer in 1..65535"
        names.add(name)
        numbers.add(number if isinstance(number, int) else -1)


def is_dns_label(text: str) -> bool:
    """RFC 1123 label: <= 63 lower-case letters, digits and '-', alphanumeric at both ends."""
    return isinstance(text, str) and len(text) <= 63 and bool(_DNS_LABEL.match(text))


def is_dns_subdomain(text: str) -> bool:
    """RFC 1123 subdomain: dot-separated labels, <= 253 characters."""
    return isinstance(text, str) and len(text) <= 253 and bool(_DNS_SUBDOMAIN.match(text))


def is_qualified_name(key: str) -> bool:
    """A label or annotation key: ``[prefix/]name`` with a DNS-subdomain prefix."""
    if not isinstance(key, str):
        return False
    prefix, sep, name = key.rpartition("/")
    if sep and not is_dns_subdomain(prefix):
        return False
    return len(name) <= 63 and bool(_QUALIFIED.match(name))


def is_label_value(value: object) -> bool:
    """A label value: empty, or <= 63 characters, alphanumeric at both ends."""
    return isinstance(value, str) and (
        value == "" or (len(value) <= 63 and bool(_QUALIFIED.match(value)))
    )


def is_quantity(text: object) -> bool:
    """A resource quantity such as 500m, 2, 16Gi or 1e3."""
    return isinstance(text, str) and bool(_QUANTITY.match(text))


def is_port_name(name: str) -> bool:
    """IANA service name: <= 15 characters, at least one letter, no '--'."""
    return (
        isinstance(name, str)
        and len(name) <= 15
        and bool(_PORT_NAME.match(name))
        and "--" not in name
        and any(ch.isalpha() for ch in name)
    )
