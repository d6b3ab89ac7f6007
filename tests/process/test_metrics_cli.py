"""`trainlaunch metrics` as a user meets it (issue 22 #4, #5, #18, #21; issue 23 #24): an app
that logged nothing, plain runs told apart by their seed, the charts of a comparison and what
to install for them.

Apps write metrics where trainlaunch told them to (``TRAINLAUNCH_METRICS_PATH``), as a rank
of ``trainlaunch.rank`` would, through the real CLI in a subprocess.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI, REPO
from trainlaunch.cli.metrics_files import plot_hint

NOTE_NONE = "this app logged no metrics (its ranks do not use trainlaunch.rank)"


def _writer(losses: list[float]) -> str:
    """A utils.sh script that writes rank 0's loss per step into its metrics directory."""
    rows = [{"step": i, "timestamp": 100.0 + i, "rank": 0, "loss": v} for i, v in enumerate(losses)]
    lines = "".join(json.dumps(r) + "\\n" for r in rows)
    return (
        'mkdir -p "$TRAINLAUNCH_METRICS_PATH" && '
        f"printf '{lines}' > \"$TRAINLAUNCH_METRICS_PATH/rank0.jsonl\""
    )


def _finished(cli: CLI, *args: str) -> str:
    handle = cli.run(*args)
    assert cli.wait(handle)["state"] == "SUCCEEDED", cli("logs", handle).stdout
    return handle


def test_an_app_that_logged_no_metrics_is_a_note_and_exit_0(cli: CLI) -> None:
    # issue 22 #4: exit 2 with a hint that blamed the argument; a CI script under set -e died
    handle = _finished(cli, "utils.echo", "--msg", "hi")
    proc = cli("metrics", "--json", handle)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["metrics"], doc["latest"], doc["files"]) == ([], {}, [])
    assert NOTE_NONE in doc["note"] and "--path" in doc["note"]
    assert proc.stderr.startswith(f"note: {handle}: {NOTE_NONE}"), proc.stderr
    text = cli("metrics", handle)
    assert (text.returncode, text.stdout) == (0, ""), text.stderr
    assert NOTE_NONE in text.stderr and "--path" in text.stderr and "error" not in text.stderr
    # a path the user gave that holds nothing: that argument is the mistake (exit 2)
    wrong = cli("metrics", handle, "--path", str(cli.cwd / "nothing"))
    assert wrong.returncode == 2 and wrong.stderr.startswith("error: no metrics files"), wrong


def test_a_running_app_that_has_not_logged_yet_says_no_records_yet(cli: CLI) -> None:
    # issue 23 #24: the same exit 2 while the app was still starting
    handle = cli.run("utils.sh", "sleep 60")
    try:
        proc = cli("metrics", "--json", handle)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["metrics"] == [] and doc["note"].startswith(f"{handle}: no records yet")
        assert proc.stderr.startswith(f"note: {handle}: no records yet"), proc.stderr
    finally:
        cli("stop", handle, check=True)


def test_plain_runs_that_differ_only_by_seed_are_told_apart(cli: CLI) -> None:
    # issue 22 #18: no seed column unless the apps were sweep points
    script = _writer([2.0, 1.0])
    one = _finished(cli, "--seed", "11", "utils.sh", script)
    two = _finished(cli, "--seed", "12", "utils.sh", script)
    rows = json.loads(cli("metrics", one, two, "--json", check=True).stdout)["apps"]
    assert [r["params"] for r in rows] == [{"seed": 11}, {"seed": 12}]
    table = cli("metrics", one, two, check=True).stdout.splitlines()
    assert table[0].split("\t") == ["handle", "seed", "steps", "loss.last", "loss.best"]
    assert [ln.split("\t")[:2] for ln in table[1:]] == [[one, "11"], [two, "12"]]


@pytest.mark.parametrize("log_y", [[], ["--log-y"]], ids=["auto", "--log-y"])
def test_comparison_chart_is_written_with_a_log_scale_option(cli: CLI, log_y: list[str]) -> None:
    # issue 22 #21: values from 3.5 down to 4e-8 (a log scale: automatic, or --log-y); the
    # chart's own rules (colour per parameter values, style per seed, legend outside) are
    # tests/unit/test_compare.py's
    steep = _writer([3.5 * 10.0 ** (-i) for i in range(9)])
    apps = [_finished(cli, "--seed", str(s), "utils.sh", steep) for s in (1, 2)]
    chart = cli.cwd / "chart.png"
    proc = cli("metrics", *apps, "--metric", "loss", "--image", str(chart), *log_y)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == f"wrote {chart}"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    one = cli("metrics", apps[0], "--metric", "loss", "--image", str(cli.cwd / "one.png"), *log_y)
    assert one.returncode == 0 and (cli.cwd / "one.png").stat().st_size > 0, one.stderr


def test_an_app_without_metrics_writes_no_chart_and_says_so(cli: CLI, tmp_path: Path) -> None:
    handle = _finished(cli, "utils.echo", "--msg", "hi")
    chart = tmp_path / "c.png"
    proc = cli("metrics", handle, "--metric", "loss", "--image", str(chart))
    assert proc.returncode == 0 and not chart.exists(), proc.stderr
    assert NOTE_NONE in proc.stderr and f"no chart written to {chart}" in proc.stderr


def test_image_without_matplotlib_says_how_this_installation_gets_it(
    cli: CLI, tmp_path: Path
) -> None:
    # issue 22 #5: the hint was `pip install 'trainlaunch[plot]'`, which is not published
    shadow = tmp_path / "shadow"
    (shadow / "matplotlib").mkdir(parents=True)
    (shadow / "matplotlib" / "__init__.py").write_text("raise ImportError('not here')\n")
    handle = _finished(cli, "utils.sh", _writer([2.0, 1.0]))
    proc = cli(
        "metrics", handle, "--metric", "loss", "--image", str(tmp_path / "c.png"),
        env={"PYTHONPATH": str(shadow)},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [  # this trainlaunch: an editable checkout
        "error: --image needs matplotlib",
        f"hint: pip install -e '{REPO}[plot]'  (this trainlaunch runs from a source checkout)",
    ]
    wheel = tmp_path / "venv" / "lib" / "site-packages"  # an installed wheel: no checkout
    assert plot_hint("/venv", wheel) == f"{sys.executable} -m pip install 'matplotlib>=3.7'"
