"""Injected settings reach every rank: seed, export strategy and metrics, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import CLI

SCRIPT = str(Path(__file__).resolve().parents[1] / "fixtures" / "rank" / "seeded_train.py")


def launch(cli: CLI, seed: int) -> str:
    return cli.run(
        "--seed",
        str(seed),
        "--export-strategy",
        "first_rank_per_node",
        "dist.ddp",
        "--nnodes",
        "2",
        "--nproc",
        "2",
        SCRIPT,
    )


def metrics(cli: CLI, handle: str) -> dict:
    return json.loads(cli("metrics", "--json", "--metric", "local", handle, check=True).stdout)


@pytest.mark.slow  # 18 s serially on a busy 2-core machine (--durations)
def test_seeded_runs_export_from_the_selected_ranks_only(cli: CLI) -> None:
    handles = [launch(cli, 7), launch(cli, 7), launch(cli, 8)]
    for h in handles:
        final = cli.wait(h, timeout=240)
        assert final["state"] == "SUCCEEDED", cli("logs", h).stdout
    first, again, other = (metrics(cli, h) for h in handles)
    # first_rank_per_node with 2 nodes x 2 processes: global ranks 0 and 2 export
    assert sorted(first["latest"]) == ["0", "2"]
    assert [Path(f).name for f in first["files"]] == ["rank0.jsonl", "rank2.jsonl"]
    assert first["skipped_lines"] == 0 and first["truncated_lines"] == 0
    assert len(first["series"]["local"]["0"]) == 5
    # the same seed reproduces every value; another seed does not
    assert first["series"] == again["series"] and first["latest"] == again["latest"]
    assert first["series"] != other["series"]
    # ranks draw from distinct streams
    assert first["series"]["local"]["0"] != first["series"]["local"]["2"]
    # the reduced value is the same on every exporting rank (a real all_reduce happened)
    assert first["latest"]["0"]["reduced"] == first["latest"]["2"]["reduced"]
    text = cli("metrics", handles[0], check=True).stdout
    assert text.splitlines()[0].split("\t")[:2] == ["rank", "step"]
