"""The sweep record and its journal, read while a submission finishes (sweeps/record.py).

The submission writes each point's handle into the journal as it goes, and at its end writes
the whole record, then removes the journal. A reader (`stop SWEEP`, `status SWEEP`) must
name every submitted point whatever moment that end falls at: once it read an old record and
then found no journal, and `stop` left the points running (CI, test_sweep_queue)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainlaunch import store
from trainlaunch.sweeps import record

SWEEP = "abcdefghij"
HANDLES = ["local://s/a-1", "local://s/a-2"]


def _submitting(home: Path, monkeypatch: pytest.MonkeyPatch) -> record.Journal:
    """A sweep of 2 points, both submitted: in the journal, not yet in the record."""
    monkeypatch.setenv("TRAINLAUNCH_HOME", str(home))
    store.ensure_private_dir(home)
    (home / "sweeps").mkdir(mode=0o700)
    rec: dict[str, Any] = {"id": SWEEP, "points": [{"handle": None}, {"handle": None}]}
    record.write_sweep(rec)
    journal = record.Journal(SWEEP)
    for i, h in enumerate(HANDLES):
        journal.add(i, h)
    return journal


def _finish(journal: record.Journal) -> None:
    """The submission's end: the whole record, then no journal."""
    record.write_sweep({"id": SWEEP, "points": [{"handle": h} for h in HANDLES]})
    journal.remove()


@pytest.mark.parametrize("when", ["before", "after the first read", "after"])
def test_every_handle_is_read_whenever_the_submission_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    journal = _submitting(tmp_path / "home", monkeypatch)
    if when == "before":
        _finish(journal)
    elif when == "after the first read":  # between the reader's two reads (either order)
        reads = {"n": 0}
        real_json, real_bytes = store.read_json, Path.read_bytes

        def then_finish() -> None:
            reads["n"] += 1
            if reads["n"] == 1:
                _finish(journal)

        def read_json(path: Path) -> Any:
            value = real_json(path)
            then_finish()
            return value

        def read_bytes(path: Path) -> bytes:
            value = real_bytes(path)
            if path.name == record.JOURNAL:
                then_finish()
            return value

        monkeypatch.setattr(store, "read_json", read_json)
        monkeypatch.setattr(Path, "read_bytes", read_bytes)
    handles = [p["handle"] for p in record.read_sweep(SWEEP)["points"]]
    assert handles == HANDLES, when
    if when == "after":
        _finish(journal)
        assert [p["handle"] for p in record.read_sweep(SWEEP)["points"]] == HANDLES
