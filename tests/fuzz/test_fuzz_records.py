"""Mutated store records (app.json, state.json, supervisor.json): the read-only commands give
a documented exit code and never crash, and the other apps in the store are unaffected.

Mutations are structure-aware: a real record from a real run with one value replaced by
arbitrary JSON, a key deleted, or the bytes cut. Only commands that never signal a process
run here (status, describe, logs, list): a mutated pid must not make a test kill anything.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import CLI
from tests.faults.fault_helpers import check_clean_exit, cli_env, run_inprocess
from tests.fuzz.fuzz_strategies import examples, json_values

RECORDS = ["app.json", "state.json", "supervisor.json"]


class Template:
    def __init__(self, root: Path) -> None:
        (root / "work").mkdir()
        self.cli = CLI(root / "home", root / "work")
        victim = self.cli.run("utils.sh", "--num-replicas", "2", "echo v; exit 2")
        keep = self.cli.run("utils.echo", "--msg", "kept")
        for h in (victim, keep):
            assert self.cli.wait(h)["is_terminal"]
        self.victim = victim.rsplit("/", 1)[1]
        self.keep = keep.rsplit("/", 1)[1]
        self.dir = self.cli.home / "apps" / self.victim
        self.original = {r: (self.dir / r).read_bytes() for r in RECORDS}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Template]:
    t = Template(tmp_path_factory.mktemp("recfuzz"))
    with cli_env(t.cli.home, t.cli.cwd):
        yield t


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON document (the root included)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _replace(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    if not path:
        return value
    doc = json.loads(json.dumps(doc))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    elif delete:
        parent.pop(path[-1])
    else:
        parent[path[-1]] = value
    return doc


@st.composite
def mutation(draw: st.DrawFn, template: Template) -> tuple[str, bytes]:
    record = draw(st.sampled_from(RECORDS))
    raw = template.original[record]
    kind = draw(st.sampled_from(["replace", "replace", "delete", "cut"]))
    if kind == "cut":
        return record, raw[: draw(st.integers(0, max(0, len(raw) - 1)))]
    doc = json.loads(raw)
    path = draw(st.sampled_from(_paths(doc)[1:] if kind == "delete" else _paths(doc)))
    value = draw(
        json_values(8)
        | st.sampled_from(
            [
                "RUNNING",
                "SUCCEEDED",
                "FAILED",
                "UNKNOWN",
                "bogus",
                -1,
                0,
                2**70,
                1e308,
                "",
                [],
                {},
                None,
                "0",
                "..",
                "../../etc",
            ]
        )
    )
    return record, json.dumps(_replace(doc, path, value, kind == "delete")).encode()


def _records_test(n: int) -> Any:
    @examples(n)
    @given(data=st.data())
    def test(template: Template, data: st.DataObject) -> None:
        record, raw = data.draw(mutation(template))
        target = template.dir / record
        try:
            target.write_bytes(raw)
            for argv in (
                ["status", template.victim],
                ["status", "--json", template.victim],
                ["describe", "--json", template.victim],
                ["logs", template.victim],
                ["logs", f"{template.victim}/sh/1"],
                ["list", "--json"],
            ):
                code, out, err = run_inprocess(argv)
                check_clean_exit(argv, code, err, allowed={0, 2, 4, 5})
                if argv[0] == "list":
                    rows = {r["app_id"]: r for r in json.loads(out)}
                    assert rows[template.keep]["state"] == "SUCCEEDED"
                    assert template.victim in rows
        finally:
            target.write_bytes(template.original[record])

    return test


test_mutated_records = _records_test(60)
test_mutated_records_long = pytest.mark.slow(_records_test(400))


def test_unmutated_template_is_readable(template: Template) -> None:
    for argv in (["status", template.victim], ["logs", f"{template.victim}/sh/1"]):
        code, _, err = run_inprocess(argv)
        assert code == 0, err


def test_copy_is_independent(template: Template, tmp_path: Path) -> None:
    """Sanity check of the fixture: restoring a record restores the app."""
    shutil.copy(template.dir / "state.json", tmp_path / "s")
    assert (tmp_path / "s").read_bytes() == template.original["state.json"]
