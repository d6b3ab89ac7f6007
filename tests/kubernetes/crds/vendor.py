"""Regenerate the vendored CRD schemas from the upstream CRD manifests (README.md says which).

    python tests/kubernetes/crds/vendor.py PATH/TO/CRD.yaml VERSION [VERSION ...]

Writes ``<plural>.<group>.<version>.json`` here: the version's ``openAPIV3Schema`` exactly,
minus the ``description`` texts (90% of the bytes), keys sorted. Nothing else is changed; strict
"unknown fields fail" checking is added by the tests (k8s_schemas.py), not stored.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent


def strip(value: Any) -> Any:
    """The schema without its description texts."""
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def main(path: str, *versions: str) -> None:
    """Write the schema of each named version of the CRD at path."""
    crd = next(
        d
        for d in yaml.safe_load_all(Path(path).read_text())
        if d and d.get("kind") == "CustomResourceDefinition"
    )
    spec = crd["spec"]
    for version in spec["versions"]:
        if version["name"] in versions:
            out = HERE / f"{spec['names']['plural']}.{spec['group']}.{version['name']}.json"
            schema = strip(version["schema"]["openAPIV3Schema"])
            out.write_text(json.dumps(schema, sort_keys=True, separators=(",", ":")) + "\n")
            print(out.name, out.stat().st_size)


if __name__ == "__main__":
    main(*sys.argv[1:])
