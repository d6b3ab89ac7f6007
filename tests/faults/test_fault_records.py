"""A torn, truncated or garbage record (app.json, state.json) breaks only its own app.

Contract: `list` shows that app as unreadable (with the reason) and every other app normally;
`status` of it is one `error:` line with exit 5 (store error) naming the file; no command
crashes (exit 70) or prints a traceback. Records come from real runs; the CLI runs
in-process through its error boundary (fast), plus a subprocess check of the real CLI.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import CLI
from tests.faults.fault_helpers import check_clean_exit, cli_env, run_inprocess


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A store with two finished apps: (home, the app to damage, the app to keep)."""
    root = tmp_path_factory.mktemp("records")
    (root / "work").mkdir()
    cli = CLI(root / "home", root / "work")
    victim = cli.run("utils.sh", "--num-replicas", "2", "echo victim")
    keep = cli.run("utils.echo", "--msg", "i am fine")
    for h in (victim, keep):
        assert cli.wait(h)["state"] == "SUCCEEDED"
    return cli.home, victim.rsplit("/", 1)[1], keep.rsplit("/", 1)[1]


@pytest.fixture
def store(template: tuple[Path, str, str], tmp_path: Path) -> tuple[Path, str, str]:
    home, victim, keep = template
    copy = tmp_path / "home"
    shutil.copytree(home, copy, symlinks=True)
    (tmp_path / "work").mkdir()
    return copy, victim, keep


def _half(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


NOT_JSON = {
    "truncated": _half,
    "empty": lambda raw: b"",
    "garbage": lambda raw: b"\x00\xff\xfe garbage {{{",
    "trailing-garbage": lambda raw: raw + b"}\x00",
}
WRONG_SHAPE = {
    "null": lambda raw: b"null",
    "list": lambda raw: b"[]",
    "number": lambda raw: b"42",
    "string": lambda raw: b'"text"',
    "empty-object": lambda raw: b"{}",
    "bad-field-types": lambda raw: json.dumps({k: 7 for k in json.loads(raw)}).encode(),
}


def _damage(home: Path, app_id: str, record: str, how: object) -> None:
    path = home / "apps" / app_id / record
    path.write_bytes(how(path.read_bytes()))  # type: ignore[operator]


def _list(home: Path) -> dict[str, dict[str, object]]:
    code, out, err = run_inprocess(["list", "--json"])
    check_clean_exit(["list"], code, err, allowed={0})
    return {r["app_id"]: r for r in json.loads(out)}


@pytest.mark.parametrize("record", ["app.json", "state.json"])
@pytest.mark.parametrize("how", list(NOT_JSON), ids=str)
def test_unparseable_record_is_reported_and_contained(
    store: tuple[Path, str, str], tmp_path: Path, record: str, how: str
) -> None:
    home, victim, keep = store
    _damage(home, victim, record, NOT_JSON[how])
    with cli_env(home, tmp_path / "work"):
        rows = _list(home)
        assert rows[keep]["state"] == "SUCCEEDED"
        assert rows[victim]["state"] == "UNKNOWN"
        assert str(rows[victim]["msg"]).startswith("unreadable"), rows[victim]
        assert record in str(rows[victim]["msg"]), rows[victim]

        code, out, err = run_inprocess(["status", victim])
        check_clean_exit(["status", victim], code, err, allowed={5})
        assert record in err and len(err.strip().splitlines()) <= 2, err
        for args in (
            ["describe", victim],
            ["logs", victim],
            ["wait", victim],
            ["stop", victim],
            ["status", "--json", victim],
        ):
            code, _, err = run_inprocess(args)
            check_clean_exit(args, code, err, allowed={5})
        for args in (["status", keep], ["logs", keep], ["describe", keep], ["wait", keep]):
            code, out, err = run_inprocess(args)
            check_clean_exit(args, code, err, allowed={0})
        assert "i am fine" in run_inprocess(["logs", keep])[1]


@pytest.mark.parametrize("record", ["app.json", "state.json"])
@pytest.mark.parametrize("how", list(WRONG_SHAPE), ids=str)
def test_record_of_the_wrong_shape_is_a_store_error_not_a_crash(
    store: tuple[Path, str, str], tmp_path: Path, record: str, how: str
) -> None:
    """Valid JSON that is not the record trainlaunch wrote (a hand edit, another version)."""
    home, victim, keep = store
    _damage(home, victim, record, WRONG_SHAPE[how])
    with cli_env(home, tmp_path / "work"):
        rows = _list(home)
        assert rows[keep]["state"] == "SUCCEEDED"
        row = rows[victim]
        assert str(row["msg"]).startswith("unreadable") or row["state"] != "RUNNING", row
        for args in (
            ["status", victim],
            ["describe", victim],
            ["logs", victim],
            ["wait", victim],
            ["stop", victim],
        ):
            code, _, err = run_inprocess(args)
            # 8: the damaged state.json held the result, which is now unknown (issue 13.5)
            check_clean_exit(args, code, err, allowed={0, 1, 5, 6, 8})
        code, _, err = run_inprocess(["status", keep])
        check_clean_exit(["status", keep], code, err, allowed={0})


@pytest.mark.parametrize("record", ["app.json", "state.json"])
def test_truncated_record_through_the_real_cli(
    store: tuple[Path, str, str], tmp_path: Path, record: str
) -> None:
    home, victim, keep = store
    _damage(home, victim, record, _half)
    cli = CLI(home, tmp_path / "work")
    proc = cli("status", victim)
    assert proc.returncode == 5
    assert proc.stderr.startswith("error: unreadable record") and record in proc.stderr
    assert "Traceback" not in proc.stderr
    listed = cli("list")
    assert listed.returncode == 0, listed.stderr
    lines = dict(ln.split("\t", 1) for ln in listed.stdout.splitlines())
    assert lines[f"local://trainlaunch/{keep}"].startswith("SUCCEEDED")
    assert "unreadable" in lines[f"local://trainlaunch/{victim}"]


def test_stray_entries_in_the_apps_dir_are_ignored(
    store: tuple[Path, str, str], tmp_path: Path
) -> None:
    """Files, empty dirs (an app being created), dot-dirs and symlinks do not break `list`."""
    home, victim, keep = store
    apps = home / "apps"
    (apps / "README").write_text("not an app")
    (apps / "being-created-1234").mkdir()
    (apps / ".hidden").mkdir()
    (apps / "dangling").symlink_to(tmp_path / "nowhere")
    with cli_env(home, tmp_path / "work"):
        rows = _list(home)
        assert rows[keep]["state"] == rows[victim]["state"] == "SUCCEEDED"
        assert "README" not in rows and "being-created-1234" not in rows
        code, _, err = run_inprocess(["status", "being-created-1234"])
        check_clean_exit(["status"], code, err, allowed={4})
