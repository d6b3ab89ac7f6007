"""`run --preflight` on the local backend, through the real CLI: the whole job (trainlaunch
starts both nodes), and torchrun's per-node recipe (one app per node, each its own env)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CLI
from trainlaunch import settings
from trainlaunch.agent.workers import reserve_port
from trainlaunch.errors import ExitCode

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ddp"


@pytest.fixture
def train(cli: CLI) -> str:
    shutil.copy(FIXTURES / "train_ddp.py", cli.cwd / "train_ddp.py")
    return "train_ddp.py"


@pytest.mark.slow
def test_run_preflight_wait_passes_and_describe_records_it(cli: CLI, train: str) -> None:
    out = cli.cwd / "out"
    out.mkdir()
    r = cli(
        "run",
        "--preflight",
        "--wait",
        "dist.ddp",
        "-j",
        "2x1",
        "--env",
        f"OUT_DIR={out}",
        train,
        "--steps",
        "5",
    )
    assert r.returncode == 0, r.stderr
    handle = r.stdout.strip()
    assert len(list(out.glob("rank*.json"))) == 2  # the ranks ran, after the preflight
    logs = cli("logs", handle).stdout
    # the agent's own line keeps the replica's prefix, padded to the ranks' (docs/logs.md)
    assert re.search(r"^train_ddp/0 +\[trainlaunch\] preflight passed: 2 nodes in", logs, re.M)
    assert logs.index("preflight passed") < logs.index("rank 0 step 0")
    text = cli("describe", handle).stdout
    assert "  preflight: passed in " in text and "all-reduce (gloo, 2 ranks)" in text
    doc = json.loads(cli("describe", "--json", handle).stdout)
    recorded = doc["metadata"]["preflight"]
    assert recorded["ok"] and recorded["nodes"] == 2 and recorded["seconds"] > 0
    assert doc["cfg"]["preflight"] is True


@pytest.mark.slow
def test_a_refused_job_exits_9_and_shows_the_table(cli: CLI, train: str, tmp_path: Path) -> None:
    old = tmp_path / "old" / "torch"
    old.mkdir(parents=True)
    (old / "__init__.py").write_text('__version__ = "2.12.0"\n')
    port = str(reserve_port())
    procs = []
    for rank, env in ((0, "OUT_DIR=."), (1, f"OUT_DIR=.,PYTHONPATH={old.parent}")):
        argv = ["run", "--preflight", "--cfg", "preflight_timeout=60", "--wait", "dist.ddp"]
        argv += ["--nnodes", "2", "--node-rank", str(rank), "--master-addr", "localhost"]
        argv += ["--master-port", port, "--env", env, train]
        procs.append(cli.popen(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == ExitCode.PREFLIGHT, err
        assert f"FAILED (train_ddp/0, exit {settings.PREFLIGHT_EXIT_CODE})" in err
        assert "preflight FAILED: 2 nodes, 1 problem" in err
        assert "): torch 2.12.0 where node 0 (" in err and f"(PYTHONPATH={old.parent})" in err
        status = cli.status(out.strip())
        assert status["state"] == "FAILED" and status["exit_code"] == settings.PREFLIGHT_EXIT_CODE


def test_preflight_for_an_app_without_node_agents_is_a_usage_error(cli: CLI) -> None:
    r = cli("run", "--preflight", "utils.echo", "--msg", "hi")
    assert r.returncode == ExitCode.USAGE
    assert r.stderr.startswith("error: --preflight checks the nodes of a dist.ddp app")


def test_the_dryrun_shows_the_agents_flags(cli: CLI, train: str) -> None:
    r = cli(
        "run",
        "--preflight",
        "--cfg",
        "preflight_match=torch;env",
        "--dryrun",
        "dist.ddp",
        "-j",
        "2x1",
        train,
    )
    assert r.returncode == 0, r.stderr
    assert "-m trainlaunch.agent --preflight --preflight-match torch,env --nnodes 2" in r.stdout
    r = cli("run", "--cfg", "preflight=true,preflight_match=torhc", "--dryrun", "dist.ddp", train)
    assert r.returncode == ExitCode.USAGE and "unknown field 'torhc'" in r.stderr
    r = cli("run", "--preflight", "--dryrun", "dist.ddp", "--nnodes", "1:2", train)
    assert r.returncode == ExitCode.USAGE and "runs torchrun (elastic" in r.stderr


def test_the_config_file_turns_it_on(cli: CLI, train: str) -> None:
    config = cli.cwd / ".trainlaunch.toml"
    config.write_text("[scheduler.local]\npreflight = true\n")
    env = {settings.CONFIG: str(config)}
    r = cli("run", "--dryrun", "dist.ddp", "-j", "2x1", train, env=env)
    assert r.returncode == 0, r.stderr
    assert "-m trainlaunch.agent --preflight --nnodes 2" in r.stdout
    r = cli("run", "--no-preflight", "--dryrun", "dist.ddp", "-j", "2x1", train, env=env)
    assert r.returncode == 0 and "--preflight" not in r.stdout
