"""Every worker gets what real torchrun 2.13 gives it: env names, values (or their kind), argv."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")  # the oracle is real torchrun

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ddp"
sys.path.insert(0, str(FIXTURES))

import parity  # noqa: E402

from trainlaunch import settings  # noqa: E402
from trainlaunch.agent.workers import reserve_port  # noqa: E402


def run_both(
    tmp_path: Path, argv: list[str], extra: dict[str, str] | None = None
) -> tuple[dict, dict]:
    dumps = {}
    for launcher in ("torchrun", "agent"):
        d = tmp_path / launcher
        d.mkdir()
        parity.finish([parity.launch(launcher, argv, d, extra)])
        dumps[launcher] = parity.load(d)
    return dumps["torchrun"], dumps["agent"]


def assert_parity(theirs: dict, ours: dict) -> None:
    assert sorted(theirs) == sorted(ours), "different ranks or attempts ran"
    problems = {key: parity.compare(theirs[key], ours[key]) for key in theirs}
    assert not any(problems.values()), problems


INHERITED = {
    "OMP_NUM_THREADS": "3",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0",
    "CUDA_VISIBLE_DEVICES": "",
    "PET_ROLE": "trainer",
}


@pytest.mark.parametrize("nproc, extra", [(1, {}), (2, {}), (4, INHERITED)])
def test_single_node(tmp_path: Path, nproc: int, extra: dict[str, str]) -> None:
    theirs, ours = run_both(
        tmp_path, ["--nproc-per-node", str(nproc), str(parity.DUMP), "--foo", "bar"], extra
    )
    assert sorted(theirs) == [(r, 0) for r in range(nproc)]
    if extra:  # inherited settings are kept; PET_ROLE is read as torchrun reads it
        assert ours[0, 0]["env"]["OMP_NUM_THREADS"] == "3"
        assert ours[0, 0]["env"]["ROLE_NAME"] == "trainer"
    assert_parity(theirs, ours)


def test_two_nodes_static(tmp_path: Path) -> None:
    dumps = {}
    for launcher in ("torchrun", "agent"):
        d = tmp_path / launcher
        d.mkdir()
        port = str(reserve_port())
        procs = []
        for node in (0, 1):
            if launcher == "torchrun":  # torchrun's static multi-node form
                argv = [
                    "--node-rank",
                    str(node),
                    "--master-addr",
                    "localhost",
                    "--master-port",
                    port,
                ]
                extra = {}
            else:  # what every trainlaunch backend sets per replica
                argv = []
                extra = {
                    settings.REPLICA_ID: str(node),
                    settings.RANK0_HOST: "localhost",
                    settings.RDZV_PORT: port,
                }
            argv += ["--nnodes", "2", "--nproc-per-node", "2", str(parity.DUMP)]
            procs.append(parity.launch(launcher, argv, d, extra))
        parity.finish(procs)
        dumps[launcher] = parity.load(d)
    assert sorted(dumps["torchrun"]) == [(r, 0) for r in range(4)]
    assert dumps["agent"][3, 0]["env"]["GROUP_RANK"] == "1"
    assert_parity(dumps["torchrun"], dumps["agent"])


def test_restart_after_a_failure(tmp_path: Path) -> None:
    theirs, ours = run_both(
        tmp_path,
        ["--nproc-per-node", "2", "--max-restarts", "1", str(parity.DUMP), "--fail-rank", "1"],
    )
    assert sorted(theirs) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert ours[1, 1]["env"]["TORCHELASTIC_RESTART_COUNT"] == "1"
    assert_parity(theirs, ours)


def test_module(tmp_path: Path) -> None:
    theirs, ours = run_both(tmp_path, ["--nproc-per-node", "2", "-m", "dumpmod", "--x"])
    assert ours[0, 0]["argv"][0].endswith("dumpmod.py")
    assert_parity(theirs, ours)


def test_no_python(tmp_path: Path) -> None:
    script = tmp_path / "dump"
    script.write_text(f"#!{sys.executable}\n" + parity.DUMP.read_text())
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    theirs, ours = run_both(tmp_path, ["--nproc-per-node", "2", "--no-python", str(script), "-v"])
    assert ours[1, 0]["argv"] == [str(script), "-v"]
    assert_parity(theirs, ours)


def test_agent_store_is_torchruns(tmp_path: Path) -> None:
    """The agent hosts the c10d store as torchrun's agent does: no documented difference."""
    theirs, ours = run_both(tmp_path, ["--nproc-per-node", "2", str(parity.DUMP)])
    for key in theirs:
        assert theirs[key]["env"]["TORCHELASTIC_USE_AGENT_STORE"] == "True"
        assert ours[key]["env"]["TORCHELASTIC_USE_AGENT_STORE"] == "True"
    assert "TORCHELASTIC_USE_AGENT_STORE" not in parity.DIFFERENCES


def test_differences_table_is_what_docs_say() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "ddp.md").read_text()
    for name in parity.DIFFERENCES:
        assert f"`{name}`" in doc
