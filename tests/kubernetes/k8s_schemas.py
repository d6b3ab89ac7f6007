"""Strict schema validation of Kubernetes objects: the core kinds against the OpenAPI schemas
``kubernetes-validate`` ships (1.25 .. 1.37), the custom kinds against their CRDs' published
schemas vendored in crds/ (README.md there names each release). Strict: an unknown field fails.

``assert_valid_text`` is what every test that produces a Kubernetes dry run calls on its text:
it must parse as YAML (``yaml.safe_load_all``), pass trainlaunch's own semantic checks (names,
labels, references: what the schemas cannot say) and every schema.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
import re
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft7Validator, Draft202012Validator
from referencing import Registry, Resource

from trainlaunch.schedulers.kubernetes.checks import check_manifests
from trainlaunch.schedulers.kubernetes.options import NEWEST_VERSION, OLDEST_VERSION

SCHEMAS = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
CRDS = Path(__file__).resolve().parent / "crds"
VERSIONS = [(1, minor) for minor in range(OLDEST_VERSION[1], NEWEST_VERSION[1] + 1)]
CUSTOM = {  # apiVersion group -> plural of each kind (the vendored file names)
    ("jobset.x-k8s.io", "JobSet"): "jobsets",
    ("trainer.kubeflow.org", "TrainJob"): "trainjobs",
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): "clustertrainingruntimes",
    ("kueue.x-k8s.io", "Workload"): "workloads",
    ("kueue.x-k8s.io", "LocalQueue"): "localqueues",
}


@functools.cache
def core_validator(version: tuple[int, int], kind: str, api_version: str) -> Draft202012Validator:
    """A cached strict validator for one core kind at one Kubernetes version."""
    folder = SCHEMAS / f"v{version[0]}.{version[1]}.0-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = json.loads((folder / f"{kind.lower()}-{group}.json").read_text())
    definitions = json.loads((folder / "_definitions.json").read_text())
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return Draft202012Validator(schema, registry=registry)


def strict(schema: Any) -> Any:
    """A CRD schema where objects with listed properties accept no others (the API server
    prunes unknown fields, so a field it does not know is a mistake that silently vanishes)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


@functools.cache
def crd_validator(api_version: str, kind: str) -> Draft7Validator:
    """A cached strict validator for a custom kind from its vendored CRD schema."""
    group, _, version = api_version.partition("/")
    plural = CUSTOM[(group, kind)]
    schema = json.loads((CRDS / f"{plural}.{group}.{version}.json").read_text())
    schema = strict(schema)
    # the top-level metadata is ObjectMeta, which CRD schemas leave open: check its basics
    schema["properties"]["metadata"] = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "namespace": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "uid": {"type": "string"},
            "creationTimestamp": {"type": "string"},
            "resourceVersion": {"type": "string"},
            "ownerReferences": {"type": "array"},
        },
        "additionalProperties": False,
    }
    return Draft7Validator(schema)


def is_custom(doc: dict[str, Any]) -> bool:
    """Whether doc is a custom resource (validated against a vendored CRD schema)."""
    return (doc["apiVersion"].partition("/")[0], doc["kind"]) in CUSTOM


def schema_errors(doc: dict[str, Any], version: tuple[int, int] = NEWEST_VERSION) -> list[str]:
    """Every schema violation of doc (a core kind at version), as 'path: message'."""
    if is_custom(doc):
        v: Any = crd_validator(doc["apiVersion"], doc["kind"])
    else:
        v = core_validator(version, doc["kind"], doc["apiVersion"])
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]


def embedded_jobs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A JobSet's Jobs as batch/v1 Jobs (their specs must suit the cluster's version too)."""
    if doc["kind"] != "JobSet":
        return []
    return [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": f"{doc['metadata']['name']}-{rj['name']}-0"},
            "spec": copy.deepcopy(rj["template"]["spec"]),
        }
        for rj in doc["spec"]["replicatedJobs"]
    ]


def assert_valid(docs: list[dict[str, Any]], oldest: tuple[int, int] = (1, 29)) -> None:
    """Each object valid by every schema from Kubernetes `oldest` to the newest."""
    for doc in docs:
        if is_custom(doc):
            errors = schema_errors(doc)
            assert errors == [], f"{doc['kind']}/{doc['metadata']['name']}: {errors}"
        for one in [d for d in [doc, *embedded_jobs(doc)] if not is_custom(d)]:
            for version in [v for v in VERSIONS if v >= oldest]:
                errors = schema_errors(one, version)
                assert errors == [], (
                    f"{one['kind']}/{one['metadata']['name']} at {version}: {errors}"
                )


def assert_valid_text(text: str, oldest: tuple[int, int] = (1, 29)) -> list[dict[str, Any]]:
    """A dry run's text: YAML, trainlaunch's checks and every schema; returns its objects."""
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    assert docs, f"no objects in:\n{text[:500]}"
    assert check_manifests(docs) == []
    assert_valid(docs, oldest)
    return docs
