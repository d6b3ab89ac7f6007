"""trainlaunch.rank.setup(): injected settings, plain python, torchrun; the import boundary."""

from __future__ import annotations

import ast
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import trainlaunch.rank as rank_lib
from trainlaunch.rank import (
    MetricLogger,
    MetricsSample,
    NullMetricLogger,
    derive_seed,
    get_rng_state,
    register_export_strategy,
    resolve_metrics_path,
    set_rng_state,
    setup,
    unregister_export_strategy,
)


@pytest.fixture(autouse=True)
def keep_global_rng() -> Iterator[None]:
    """setup() seeds the process; give the next test the generators it would have had."""
    saved = get_rng_state()
    yield
    set_rng_state(saved)


def as_rank(monkeypatch: pytest.MonkeyPatch, rank: int, world_size: int, **settings: str) -> None:
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", str(world_size))
    monkeypatch.setenv("LOCAL_RANK", str(rank))
    for name, value in settings.items():
        monkeypatch.setenv(f"TRAINLAUNCH_{name.upper()}", value)


def written(logger: MetricLogger | NullMetricLogger) -> list[dict[str, object]]:
    logger.log(MetricsSample(0, 0, {"x": 1.0}))
    logger.close()
    assert logger.filepath is not None
    return [json.loads(line) for line in Path(logger.filepath).read_text().splitlines()]


def test_plain_python_with_nothing_injected(helpers: Any, tmp_path: Path) -> None:
    code = """
        import json, random
        import trainlaunch.rank as rank_lib
        logger = rank_lib.setup()
        print(json.dumps([type(logger).__name__, logger.filepath, random.random()]))
        logger.log(rank_lib.MetricsSample(0, 0, {"loss": 0.5}))
    """  # no close(): interpreter exit writes the buffer
    result = helpers.run_child(code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    kind, path, draw = json.loads(result.stdout)
    assert kind == "MetricLogger"
    assert Path(path) == tmp_path / "metrics" / "rank0.jsonl"
    random.seed(derive_seed(95050, 0))  # default seed, ranked, rank 0
    assert draw == random.random()
    (row,) = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert row["rank"] == 0 and row["loss"] == 0.5


def test_unselected_rank_gets_a_null_logger_and_no_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    as_rank(monkeypatch, 3, 4, export_strategy="single_rank", export_rank="0",
            metrics_path=str(tmp_path / "m"))  # fmt: skip
    logger = setup()
    assert isinstance(logger, NullMetricLogger)
    logger.log(MetricsSample(0, 0, {"x": 1.0}))
    logger.close()
    assert list(tmp_path.iterdir()) == []


def test_selected_rank_writes_to_the_expanded_template(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    as_rank(monkeypatch, 3, 4, export_strategy="single_rank", export_rank="-1", seed="5",
            metrics_path=str(tmp_path / "run-{rank}" / "m{rank}.jsonl"))  # fmt: skip
    logger = setup()
    expected_draw = random.random()
    assert isinstance(logger, MetricLogger)
    assert Path(logger.filepath) == tmp_path / "run-3" / "m3.jsonl"
    assert [row["rank"] for row in written(logger)] == [3]
    random.seed(derive_seed(5, 3))
    assert random.random() == expected_draw


def test_unranked_setup_uses_the_seed_as_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    as_rank(monkeypatch, 1, 2, seed="5", metrics_path=str(tmp_path) + "/")
    setup(ranked=False).close()
    draw = random.random()
    random.seed(5)
    assert random.random() == draw


def test_metrics_directory_gets_one_file_per_rank(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    as_rank(monkeypatch, 1, 2, metrics_path=str(tmp_path))  # an existing directory, no slash
    logger = setup()
    assert Path(logger.filepath or "") == tmp_path / "rank1.jsonl"
    assert written(logger)[0]["rank"] == 1


def test_custom_strategy_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    register_export_strategy("tests:odd", lambda settings, rank, world: rank % 2 == 1)
    try:
        as_rank(monkeypatch, 1, 4, export_strategy="tests:odd", metrics_path=str(tmp_path) + "/")
        selected = setup()
        assert isinstance(selected, MetricLogger)
        selected.close()
        monkeypatch.setenv("RANK", "2")
        assert isinstance(setup(), NullMetricLogger)
    finally:
        unregister_export_strategy("tests:odd")


def test_inconsistent_rank_environment_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    as_rank(monkeypatch, 4, 4)
    with pytest.raises(ValueError, match="inconsistent rank environment"):
        setup()


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (None, "metrics/rank2.jsonl"),
        ("out/", "out/rank2.jsonl"),
        ("out/{rank}/", "out/2/rank2.jsonl"),
        ("out/m-{rank}.jsonl", "out/m-2.jsonl"),
        ("out/all.jsonl", "out/all.jsonl"),
        ("out/{other}-{rank}.jsonl", "out/{other}-2.jsonl"),
    ],
)
def test_resolve_metrics_path(template: str | None, expected: str) -> None:
    assert resolve_metrics_path(template, 2) == expected


@pytest.mark.slow  # 6 s serially on a busy 2-core machine (--durations)
def test_setup_under_plain_torchrun(helpers: Any, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import random\nimport trainlaunch.rank as rank_lib\n"
        "logger = rank_lib.setup()\n"
        "logger.log(rank_lib.MetricsSample(0, 0, {'draw': random.random()}))\n"
        "logger.close()\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         str(script)],
        cwd=tmp_path, env=helpers.child_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {r: json.loads((tmp_path / "metrics" / f"rank{r}.jsonl").read_text()) for r in (0, 1)}
    assert [rows[r]["rank"] for r in (0, 1)] == [0, 1]
    assert rows[0]["draw"] != rows[1]["draw"], "ranked seeding gives each rank its own stream"


# --- import boundary -----------------------------------------------------------------------------
def test_importing_the_rank_library_and_reader_does_not_import_torch(helpers: Any) -> None:
    code = """
        import sys
        import trainlaunch.rank, trainlaunch.rank.rng, trainlaunch.metrics.reader
        print(sorted(m for m in ("torch", "numpy") if m in sys.modules))
    """
    result = helpers.run_child(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_rank_modules_import_only_what_the_architecture_allows() -> None:
    allowed = {"trainlaunch.settings", "trainlaunch.errors", "trainlaunch.rank", "torch", "numpy"}
    allowed.add("orjson")  # a dependency: the JSON Lines fast path (docs/rank-library.md)
    package = Path(rank_lib.__file__).parent
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                ok = top in sys.stdlib_module_names or any(
                    name == a or name.startswith(a + ".") for a in allowed
                )
                assert ok, f"{path.name} imports {name}"
