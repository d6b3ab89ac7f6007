"""Semantic checks of the core objects (Job, pod, container, Service, ConfigMap, Secret): what
the API server rejects but no OpenAPI schema says (checks.py applies them to an app)."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from trainlaunch.schedulers.kubernetes.syntax import (
    is_dns_label,
    is_dns_subdomain,
    is_label_value,
    is_port_name,
    is_qualified_name,
    is_quantity,
)

_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_FAILURE_ACTIONS = frozenset({"FailJob", "FailIndex", "Ignore", "Count"})
_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})
MAX_ANNOTATIONS_BYTES = 256 * 1024
MAX_CONFIGMAP_BYTES = 1024 * 1024  # data + decoded binaryData, as the API server counts
_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
SWEEP_POINTS = "trainlaunch.io/sweep-points"  # marks the Job of a --max-parallel sweep


def configmap_size(doc: Mapping[str, Any]) -> int:
    """Bytes a ConfigMap holds by the API server's count: data values + decoded binaryData."""
    size = sum(len(str(v).encode()) for v in (doc.get("data") or {}).values())
    for value in (doc.get("binaryData") or {}).values():
        try:
            size += len(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            size += len(value)
    return size


def check_configmap(doc: Mapping[str, Any]) -> Iterator[str]:
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


def check_secret(doc: Mapping[str, Any]) -> Iterator[str]:
    if not is_dns_subdomain(doc["metadata"].get("name", "")):
        yield f"Secret name {doc['metadata'].get('name')!r} is not an RFC 1123 subdomain"
    data = doc.get("stringData") or {}
    for key, value in data.items():
        if not _CONFIGMAP_KEY.match(key):  # Secret keys follow the ConfigMap key rule
            yield f"key {key!r} must match [-._a-zA-Z0-9]+"
        if not isinstance(value, str):
            yield f"stringData {key!r} is not a string"
    if (size := sum(len(str(v).encode()) for v in data.values())) > MAX_CONFIGMAP_BYTES:
        yield f"holds {size} bytes, over the API server's limit of {MAX_CONFIGMAP_BYTES}"


def check_meta(meta: Mapping[str, Any]) -> Iterator[str]:
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


def check_job(
    meta: Mapping[str, Any],
    spec: Mapping[str, Any],
    services: Mapping[str, dict[str, Any]] | None,
    restart_policy: bool = True,
) -> Iterator[str]:
    """A Job (or a JobSet's or TrainJob's, services None: their controller makes the Service;
    restart_policy False: the ClusterTrainingRuntime sets it)."""
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
    yield from _check_pod(template.get("spec", {}), pod_labels, services, restart_policy)


def _check_pod(
    pod: Mapping[str, Any],
    pod_labels: Mapping[str, str],
    services: Mapping[str, dict[str, Any]] | None,
    restart_policy: bool,
) -> Iterator[str]:
    if restart_policy and pod.get("restartPolicy") != "Never":
        yield "restartPolicy must be Never (the Job controller, not the kubelet, retries)"
    svc = None if services is None else services.get(pod.get("subdomain", ""))
    if services is not None and svc is None:
        yield f"subdomain {pod.get('subdomain')!r} names no Service in this app"
    elif svc is not None:
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


def check_service(spec: Mapping[str, Any]) -> Iterator[str]:
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
