"""The list index is a cache: whatever happens to it or to the records, `list` tells the truth.

`list` caches finished apps' rows in apps/.list-index.json, keyed by the identity of each app's
two records. A record damaged after it was indexed (even one rewritten with its old size and
mtime restored) shows as unreadable exactly as without an index; a damaged index is ignored.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI
from tests.faults.fault_helpers import check_clean_exit, cli_env, run_inprocess

INDEX = ".list-index.json"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A store with a succeeded, a failed and a cancelled app: (home, {state: app id})."""
    root = tmp_path_factory.mktemp("index")
    (root / "work").mkdir()
    cli = CLI(root / "home", root / "work")
    ok = cli.run("utils.echo", "--msg", "fine")
    bad = cli.run("utils.sh", "exit 3")
    assert cli.wait(ok)["state"] == "SUCCEEDED"
    assert cli.wait(bad)["state"] == "FAILED"
    stopped = cli.run("utils.sh", "sleep 300")
    assert cli("stop", stopped).returncode == 0
    assert cli.wait(stopped)["state"] == "CANCELLED"
    ids = {"SUCCEEDED": ok, "FAILED": bad, "CANCELLED": stopped}
    return cli.home, {state: h.rsplit("/", 1)[1] for state, h in ids.items()}


@pytest.fixture
def store(template: tuple[Path, dict[str, str]], tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home, ids = template
    copy = tmp_path / "home"
    shutil.copytree(home, copy, symlinks=True)
    (copy / "apps" / INDEX).unlink(missing_ok=True)
    (tmp_path / "work").mkdir()
    return copy, ids


def listed() -> dict[str, dict[str, Any]]:
    code, out, err = run_inprocess(["list", "--json"])
    check_clean_exit(["list"], code, err, allowed={0})
    return {r["app_id"]: r for r in json.loads(out)}


def test_indexed_rows_equal_derived_rows(
    store: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    home, ids = store
    with cli_env(home, tmp_path / "work"):
        derived = listed()  # no index yet: every row from the records
        index = json.loads((home / "apps" / INDEX).read_text())
        assert set(index["apps"]) == set(ids.values())  # all three ended: all cached
        assert listed() == derived  # now from the index
        assert {derived[app_id]["state"] for app_id in ids.values()} == set(ids)


@pytest.mark.parametrize("record", ["app.json", "state.json"])
def test_record_damaged_after_indexing_shows_unreadable(
    store: tuple[Path, dict[str, str]], tmp_path: Path, record: str
) -> None:
    home, ids = store
    victim = ids["SUCCEEDED"]
    path = home / "apps" / victim / record
    with cli_env(home, tmp_path / "work"):
        assert listed()[victim]["state"] == "SUCCEEDED"
        before = path.stat()
        raw = path.read_bytes()
        path.write_bytes(b"\x00" * len(raw))  # same size...
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # ...and mtime as before
        row = listed()[victim]
        assert row["state"] == "UNKNOWN" and str(row["msg"]).startswith("unreadable"), row
        assert record in str(row["msg"])
        (home / "apps" / INDEX).unlink()
        assert listed()[victim] == row  # exactly what list says without an index


@pytest.mark.parametrize(
    "content",
    [
        b"garbage{{",
        b"[]",
        b'{"version": 99, "apps": {}}',
        b'{"version": 1, "apps": []}',
        None,  # filled in: every cached row replaced by a lie with a wrong-shaped row
    ],
    ids=["garbage", "list", "other-version", "apps-not-a-dict", "wrong-rows"],
)
def test_damaged_index_is_ignored(
    store: tuple[Path, dict[str, str]], tmp_path: Path, content: bytes | None
) -> None:
    home, ids = store
    with cli_env(home, tmp_path / "work"):
        truth = listed()
        index_path = home / "apps" / INDEX
        if content is None:
            index = json.loads(index_path.read_text())
            for n, entry in enumerate(index["apps"].values()):
                entry["row"] = [["NOPE", "x", None, ""], ["RUNNING", 5, None, ""], "x"][n % 3]
            content = json.dumps(index).encode()
        index_path.write_bytes(content)
        assert listed() == truth


def test_read_only_store_lists_without_an_index(
    store: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    home, ids = store
    apps = home / "apps"
    apps.chmod(0o500)
    try:
        with cli_env(home, tmp_path / "work"):
            rows = listed()
        assert {rows[a]["state"] for a in ids.values()} == set(ids)
        if os.geteuid() != 0:  # root writes through the mode bits
            assert not (apps / INDEX).exists()
    finally:
        apps.chmod(0o700)
