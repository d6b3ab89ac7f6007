"""`trainlaunch metrics` on damaged files and ordinary mistakes (issue 13: items 4 and 11).

A real app writes real metrics files (`rank{N}.jsonl` in its directory of the store); each
test then damages one rank's file the way a crash, a full disk or a hand edit would, and runs
the real CLI in a subprocess with a deadline (a FIFO used to make it hang). Every case ends
with a documented exit code and at most one `error:` line; damage is counted, never shown.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import CLI
from tests.faults.fault_helpers import app_dir, check_clean_exit
from tests.fuzz.fuzz_strategies import examples
from trainlaunch.metrics import reader as mr

GOOD = [
    {"step": 0, "epoch": 0, "timestamp": "2026-01-01T00:00:00Z", "rank": 1, "loss": 2.0},
    {"step": 1, "epoch": 0, "timestamp": "2026-01-01T00:00:01Z", "rank": 1, "loss": 1.5},
]


class App:
    """A finished app that logged `loss` from rank 0 into its metrics directory."""

    def __init__(self, cli: CLI) -> None:
        self.cli = cli
        rows = [
            {"step": 0, "epoch": 0, "timestamp": "2026-01-01T00:00:00Z", "rank": 0, "loss": 3.0},
            {"step": 1, "epoch": 0, "timestamp": "2026-01-01T00:00:01Z", "rank": 0, "loss": 2.5},
        ]
        lines = "".join(json.dumps(r) + "\\n" for r in rows)
        # the app writes where trainlaunch told it to (TRAINLAUNCH_METRICS_PATH), as a rank would
        self.handle = cli.run(
            "utils.sh",
            f'mkdir -p "$TRAINLAUNCH_METRICS_PATH" && '
            f"printf '{lines}' > \"$TRAINLAUNCH_METRICS_PATH/rank0.jsonl\"",
        )
        assert cli.wait(self.handle)["state"] == "SUCCEEDED", cli("logs", self.handle).stdout
        self.metrics = app_dir(cli, self.handle) / "metrics"
        assert (self.metrics / "rank0.jsonl").is_file(), list(self.metrics.iterdir())

    def reset(self) -> None:
        """rank0 as the app wrote it; rank1 well-formed (as a second rank would write it)."""
        for p in self.metrics.iterdir():
            if p.name != "rank0.jsonl":
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
        (self.metrics / "rank1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in GOOD))

    def metrics_cmd(self, *args: str) -> tuple[int, str, str]:
        proc = self.cli("metrics", self.handle, *args, timeout=60)
        check_clean_exit(["metrics", *args], proc.returncode, proc.stderr)
        return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    root = tmp_path_factory.mktemp("metricsfuzz")
    (root / "work").mkdir()
    yield App(CLI(root / "home", root / "work"))


@pytest.fixture
def fresh(app: App) -> App:
    app.reset()
    return app


def _latest(app: App) -> dict[str, dict[str, object]]:
    code, out, err = app.metrics_cmd("--json")
    assert code == 0, err
    return json.loads(out)["latest"]


def _damage_rank1(app: App, kind: str) -> None:
    path = app.metrics / "rank1.jsonl"
    path.unlink()
    if kind == "directory":
        path.mkdir()
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dangling":
        path.symlink_to(app.metrics / "nowhere")


@pytest.mark.parametrize("kind", ["directory", "dev-zero", "fifo", "dangling"])
def test_something_else_in_place_of_a_rank_file_is_skipped_and_said(fresh: App, kind: str) -> None:
    _damage_rank1(fresh, kind)
    code, out, _ = fresh.metrics_cmd()
    assert code == 0
    assert "rank1.jsonl: not a regular file" in out, out
    assert out.splitlines()[1].startswith("0\t1\t"), out  # rank 0 is still read
    code, out, err = fresh.metrics_cmd("--path", str(fresh.metrics / "rank1.jsonl"))
    assert code == 2 and ("not a regular file" in err or "no metrics files" in err), err


def test_a_bomb_line_of_nested_brackets_is_counted_not_fatal(fresh: App) -> None:
    with open(fresh.metrics / "rank1.jsonl", "a") as f:
        f.write("[" * 100_000 + "]" * 100_000 + "\n")
        f.write('{"step": 2, "loss": ' + "[" * 1000 + "]" * 1000 + "}\n")
    code, out, _ = fresh.metrics_cmd()
    assert code == 0
    assert "ignored 2 unparseable or malformed" in out, out
    assert _latest(fresh)["1"]["loss"] == 1.5


def test_an_endless_line_is_cut_and_counted(fresh: App) -> None:
    with open(fresh.metrics / "rank1.jsonl", "a") as f:
        f.write('{"step": 9, "loss": "' + "x" * (3 << 20) + '"}\n')
        f.write(json.dumps({**GOOD[1], "step": 10, "loss": 1.0}) + "\n")
    assert _latest(fresh)["1"]["step"] == 10
    code, out, _ = fresh.metrics_cmd()
    assert "ignored 1 unparseable or malformed" in out, out


def _sparse(path: Path, where: str, size: int = 20 << 30) -> None:
    """rank1's two good records with a hole of ``size`` (NULs nobody wrote) before, between
    or after them, as a truncate(2) or a crashed preallocating writer leaves."""
    first, second = (json.dumps(r) + "\n" for r in GOOD)
    with open(path, "wb") as f:
        if where == "before":
            f.truncate(size)
            f.seek(size)
            f.write(b"\n")  # the hole ends a line of its own: damage, counted once
        f.write(first.encode())
        if where == "between":
            f.truncate(size)
            f.seek(size)
            f.write(b"\n")
        f.write(second.encode())
        if where == "after":
            f.truncate(f.tell() + size)
    if os.stat(path).st_blocks * 512 >= 1 << 20:
        pytest.skip(f"{path.parent} does not keep sparse files (st_blocks counts the hole)")


@pytest.mark.parametrize("where", ["before", "between", "after"])
def test_a_huge_sparse_file_costs_what_was_written(fresh: App, where: str) -> None:
    """Issue 23 #25: a 20 GiB sparse rank file took ~100 s to read (`metrics`, `--metric`):
    the holes are skipped (SEEK_DATA), never read, and the values are those of a full read."""
    _sparse(fresh.metrics / "rank1.jsonl", where)
    for args in ([], ["--metric", "loss"], ["--json"]):
        t0 = time.monotonic()
        code, out, err = fresh.metrics_cmd(*args)
        took = time.monotonic() - t0
        assert code == 0, err
        assert took < 10, f"metrics {args} took {took:.1f}s on a 20 GiB sparse file"
    latest = _latest(fresh)
    assert latest["1"]["loss"] == 1.5, latest
    # the hole is one damaged line (a truncated last line when nothing ends it), as if read
    damage = "0 unparseable or malformed and 1 truncated" if where == "after" else "1 unparse"
    for args in ([], ["--metric", "loss"]):
        code, out, _ = fresh.metrics_cmd(*args)
        assert f"(ignored {damage}" in out, out


@pytest.mark.parametrize(
    "record",
    [
        {"step": True, "loss": [1]},
        {"step": "7", "loss": 9.0},
        {"step": 1.5, "loss": 9.0},
        {"step": 3, "rank": True, "loss": 9.0},
        {"step": 3, "rank": -1, "loss": 9.0},
        {"step": 3, "epoch": [0], "loss": 9.0},
        {"step": 3, "timestamp": {"a": 1}, "loss": 9.0},
    ],
    ids=lambda r: json.dumps(r)[:40],
)
def test_wrong_shaped_records_are_never_latest_values(fresh: App, record: dict) -> None:
    """Issue 13.11: `{"step": true, "loss": [1]}` used to show as `1 True [1]`."""
    with open(fresh.metrics / "rank1.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    latest = _latest(fresh)
    assert latest["1"] == {"step": 1, "epoch": 0, "loss": 1.5}, latest
    code, out, _ = fresh.metrics_cmd()
    assert "True" not in out and "[1]" not in out and "9" not in out.splitlines()[2], out
    assert "ignored 1 unparseable or malformed" in out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--metric", "loss", "--image", "/nonexistent/dir/x.png"], "no directory"),
        (["--metric", "loss", "--image", "chart.nosuchformat"], "unknown image format"),
        (["--metric", "loss", "--image", "chart"], "unknown image format"),
        (["--metric", "nosuch", "--image", "chart.png"], "no metric 'nosuch'"),
        (["--metric", "nosuch"], "no metric 'nosuch'"),
        (["--image", "chart.png"], "--image needs --metric"),
    ],
)
def test_image_mistakes_are_one_error_line(fresh: App, args: list[str], needle: str) -> None:
    code, out, err = fresh.metrics_cmd(*args)
    assert code == 2, err
    assert err.splitlines()[0].startswith("error:") and needle in err.splitlines()[0], err
    assert len([ln for ln in err.splitlines() if not ln.startswith(("error:", "hint:"))]) == 0, (
        f"more than the error line (a library warning?):\n{err}"
    )
    assert not (fresh.cli.cwd / "chart.png").exists()


@pytest.mark.parametrize("compare", [False, True], ids=["one-app", "compare"])
def test_image_is_written(fresh: App, compare: bool) -> None:
    """The chart itself: one app's ranks, or apps side by side (`metrics H1 H2`)."""
    chart = fresh.cli.cwd / ("compare.png" if compare else "chart.png")
    handles = [fresh.handle, fresh.handle] if compare else [fresh.handle]
    proc = fresh.cli("metrics", *handles, "--metric", "loss", "--image", str(chart), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    chart.unlink()


@examples(100)
@given(
    lines=st.lists(
        st.one_of(
            st.text(alphabet='[]{}":,0123456789.eE-truefalsn \\', max_size=200),
            st.builds(
                lambda d, body: "[" * d + body + "]" * d, st.integers(0, 3000), st.text(max_size=5)
            ),
            st.builds(
                json.dumps,
                st.dictionaries(
                    st.text(max_size=5),
                    st.recursive(
                        st.none()
                        | st.booleans()
                        | st.integers()
                        | st.floats()
                        | st.text(max_size=5),
                        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c),
                        max_leaves=10,
                    ),
                ),
            ),
        ),
        max_size=6,
    )
)
def test_parse_lines_never_raises_and_keeps_only_well_shaped_records(lines: list[str]) -> None:
    records, skipped, truncated = mr.parse_lines(line + "\n" for line in lines)
    assert len(records) + skipped + truncated == sum(1 for ln in lines if ln.strip())
    for r in records:
        step = r.get("step")
        assert step is None or (isinstance(step, int) and not isinstance(step, bool)), r
