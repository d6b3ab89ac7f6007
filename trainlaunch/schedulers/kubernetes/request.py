"""What ``schedule`` submits (the objects, in order) and how a dry run prints it: YAML.

The text is the objects exactly, one YAML document each (every one starts with ``---``, so
dry runs printed one after another still parse), after a comment saying what they are.
Shown with placeholders (``run --dryrun``), every string is substituted *before* the YAML is
written, so a masked value or a placeholder is quoted where YAML needs it; and the app's name,
which must stay a valid Kubernetes name, reads ``<base>-xxxxx`` (a comment says so) instead
of a placeholder that no API server would take.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from trainlaunch.settings import SECRET_MASK
from trainlaunch.values import frozen

SUFFIX_LEN = 5  # the random characters that end an app's name
STAND_IN = "x" * SUFFIX_LEN  # they read so in a dry run shown with placeholders
_NOT_TEXT = frozenset({"binaryData"})  # base64 bytes: nothing to mask or substitute in them


@frozen
class KubernetesRequest:
    """What schedule submits, in order, and where to."""

    namespace: str
    name: str
    resources: tuple[dict[str, Any], ...]
    context: str | None = None
    kubeconfig: str | None = None
    api: str = "job"  # the target: job, jobset or trainjob

    @property
    def app_id(self) -> str:
        """``namespace:name``."""
        return f"{self.namespace}:{self.name}"


def request_text(request: KubernetesRequest) -> str:
    """The objects exactly, after a one-line comment."""
    return _header(request) + to_yaml(list(request.resources))


def substituted_text(request: KubernetesRequest, substitute: Callable[[str], str]) -> str:
    """The objects with substitute applied to every string first (the YAML stays valid)."""
    drawn = substitute(request.name) != request.name  # the name is shown as a placeholder
    stand_in = request.name[:-SUFFIX_LEN] + STAND_IN
    name = re.compile(rf"(?<![\w]){re.escape(request.name)}(?![\w])")
    changed = {"placeholder": False, "masked": False}

    def each(text: str) -> str:
        if drawn:
            text = name.sub(stand_in, text)
        new = substitute(text)
        if new != text:
            masked = SECRET_MASK in new and SECRET_MASK not in text
            changed["masked" if masked else "placeholder"] = True
        return new

    docs = [_map_strings(doc, each) for doc in request.resources]
    notes = []
    if drawn:
        notes.append(
            f"# {stand_in} stands for the app's name, drawn at submission "
            f"({request.name[:-SUFFIX_LEN]} and {SUFFIX_LEN} random letters or digits)"
        )
    if changed["placeholder"]:
        notes.append("# values written <...: ... at submission> are chosen at submission too")
    if changed["masked"]:
        notes.append(f"# {SECRET_MASK} hides a secret value (--show-secrets shows it)")
    return _header(request) + "".join(f"{n}\n" for n in notes) + to_yaml(docs)


def _header(request: KubernetesRequest) -> str:
    kinds = ", ".join(str(d.get("kind")) for d in request.resources)
    return (
        f"# trainlaunch: {len(request.resources)} objects for Kubernetes (api={request.api}), "
        f"created in this order: {kinds}\n"
    )


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: v if k in _NOT_TEXT else _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    return value


def to_yaml(docs: list[dict[str, Any]]) -> str:
    """The manifests as multi-document YAML, each document started by ``---`` (JSON documents
    without PyYAML: JSON is YAML too)."""
    try:
        import yaml
    except ImportError:
        return "".join(f"---\n{json.dumps(d, indent=2)}\n" for d in docs)
    # No line folding: every arg and annotation stays on one line, as written.
    return str(
        yaml.safe_dump_all(
            docs, sort_keys=False, default_flow_style=False, width=1 << 30, explicit_start=True
        )
    )
