"""`trainlaunch torchrun` exits as real torchrun does on bad input, with a one-line error.

torchrun 2.13 exits 2 where its argparse refuses the command line (unknown option, missing or
mistyped value, no script) and 1 where its code raises after parsing (``--nnodes 2:20:30``,
``--nproc-per-node unknown``, ``--no-python --module``, ...) or the launch fails (no such
script). Real torchrun runs every case (tests/fixtures/ddp/torchrun_exit.py: one torch import,
one forked ``torch.distributed.run.main`` per case); ``trainlaunch run dist.ddp`` keeps its
documented usage error, exit 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI

DRIVER = Path(__file__).resolve().parents[1] / "fixtures" / "ddp" / "torchrun_exit.py"

# (argv, PET_* environment, real torchrun 2.13's exit code)
CASES: list[tuple[list[str], dict[str, str], int]] = [
    (["--foo", "1", "ok.py"], {}, 2),  # unknown option
    (["--nnodes"], {}, 2),  # missing value
    (["--nproc-per-node", "1"], {}, 2),  # no script
    (["-m"], {}, 2),
    (["--max-restarts", "x", "ok.py"], {}, 2),  # argparse's type=int
    (["--monitor-interval", "abc", "ok.py"], {}, 2),
    (["--rdzv=x", "ok.py"], {}, 2),  # ambiguous abbreviation
    (["ok.py"], {"PET_MAX_RESTARTS": "x"}, 2),  # argparse converts PET_* defaults too
    (["--nproc-per-node", "unknown", "ok.py"], {}, 1),
    (["--nproc-per-node", "0", "ok.py"], {}, 1),
    (["--nproc-per-node", "gpu", "ok.py"], {"CUDA_VISIBLE_DEVICES": ""}, 1),  # no GPU visible
    (["--nnodes", "2:20:30", "ok.py"], {}, 1),
    (["--nnodes", "x", "ok.py"], {}, 1),
    (["--nnodes", "2:1", "ok.py"], {}, 1),
    (["--nnodes", "0", "ok.py"], {}, 1),
    (["--no-python", "--module", "ok.py"], {}, 1),
    (["--redirects", "5", "ok.py"], {}, 1),
    (["--tee", "9", "ok.py"], {}, 1),
    (["--max-restarts", "-1", "ok.py"], {}, 1),
    (["--local-ranks-filter", "a", "ok.py"], {}, 1),
    (["--rdzv-conf", "foo", "ok.py"], {}, 1),
    (["--rdzv-backend", "nosuch", "ok.py"], {}, 1),
    (["--master-port", "70000", "ok.py"], {}, 1),
    (["--monitor-interval", "0", "ok.py"], {}, 1),
    (["--shutdown-timeout", "-1", "ok.py"], {}, 1),
    (["ok.py"], {"PET_NNODES": "x"}, 1),
    (["ok.py"], {"PET_STANDALONE": "x"}, 1),  # torchrun's check_env, outside argparse
    (["nosuch.py"], {}, 1),  # torchrun's worker fails; trainlaunch refuses it up front
]


def case_id(case: tuple[list[str], dict[str, str], int]) -> str:
    argv, env, _ = case
    return " ".join([*(f"{k}={v}" for k, v in env.items()), *argv]) or "(none)"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("exit-codes")
    (work / "ok.py").write_text("print('ok')\n")
    return work


@pytest.fixture(scope="module")
def torchrun_codes(workdir: Path) -> dict[str, int]:
    """Real torchrun's exit code per case (one process, torch imported once)."""
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PET_")}
    cases = json.dumps([[argv, pet] for argv, pet, _ in CASES])
    proc = subprocess.run(
        [sys.executable, str(DRIVER), cases],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(zip(map(case_id, CASES), json.loads(proc.stdout), strict=True))


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_dropin_exits_as_torchrun(
    cli: CLI, workdir: Path, torchrun_codes: dict[str, int], case: tuple
) -> None:
    argv, pet, expected = case
    assert torchrun_codes[case_id(case)] == expected  # torchrun 2.13, measured now
    proc = cli("torchrun", *argv, env=pet, cwd=workdir)
    assert proc.returncode == expected, proc.stderr
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    assert len([ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]) == 1


@pytest.mark.parametrize(
    "argv",
    [["--nnodes", "2:20:30", "ok.py"], ["--nproc-per-node", "unknown", "ok.py"], ["nosuch.py"]],
    ids=" ".join,
)
def test_run_dist_ddp_keeps_its_usage_error(cli: CLI, workdir: Path, argv: list[str]) -> None:
    proc = cli("run", "dist.ddp", *argv, cwd=workdir)
    assert proc.returncode == 2 and proc.stderr.startswith("error: "), proc.stderr
