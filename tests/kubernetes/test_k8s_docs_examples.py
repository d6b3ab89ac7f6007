"""The complete examples in docs/kubernetes.md are what the CLI prints, and valid.

A ``<!-- dryrun: ARGS -->`` line names the `trainlaunch` command whose output the ```yaml
block after it shows; ``<!-- runtime-manifest -->`` the ClusterTrainingRuntime. Rerun with
UPDATE_DOCS=1 to rewrite the blocks, and review the diff.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from k8s_helpers import cli
from k8s_schemas import assert_valid_text, schema_errors

from trainlaunch.schedulers.kubernetes.request import to_yaml
from trainlaunch.schedulers.kubernetes.trainjob import runtime_manifest

DOC = Path(__file__).resolve().parents[2] / "docs" / "kubernetes.md"
BLOCK = re.compile(
    r"(<!-- (dryrun: (?P<args>[^\n]*?)|runtime-manifest) -->\n```yaml\n)(?P<body>.*?)(```)", re.S
)


def expected(args: str | None, tmp_path: Path) -> str:
    """What the block after the marker must hold."""
    if args is None:
        return to_yaml([runtime_manifest()])
    # run outside any git work tree: the code of record (trainlaunch.io/code) is the same text
    # wherever the tests run
    out = cli(tmp_path, *shlex.split(args), kubeconfig=tmp_path / "no-kubeconfig", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_examples_are_the_clis_output(tmp_path: Path) -> None:
    text = DOC.read_text()
    blocks = list(BLOCK.finditer(text))
    assert len(blocks) == 4, "three targets and the runtime"
    new, last = [], 0
    for m in blocks:
        want = expected(m["args"], tmp_path)
        if not os.environ.get("UPDATE_DOCS"):
            assert m["body"] == want, f"rerun with UPDATE_DOCS=1 and review: {m['args']}"
        if m["args"] is None:  # not an app: only its CRD's schema applies
            assert schema_errors(runtime_manifest()) == []
        else:
            assert_valid_text(want)
        new += [text[last : m.start("body")], want]
        last = m.end("body")
    if os.environ.get("UPDATE_DOCS"):
        DOC.write_text("".join(new) + text[last:])


@pytest.mark.parametrize("api", ["job", "jobset", "trainjob"])
def test_each_target_has_an_example(api: str) -> None:
    assert f"--cfg api={api}," in DOC.read_text()
