"""The pure node plan: engine choice, rendezvous rules, per-rank env (rank_envs), torchrun argv."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from trainlaunch import settings
from trainlaunch.agent import flags
from trainlaunch.agent.dryrun import rank_envs
from trainlaunch.agent.plan import choose_engine, plan_node
from trainlaunch.agent.torchrun import TORCHRUN_ENTRY, torchrun_argv
from trainlaunch.errors import UsageError

NODE1 = {
    settings.REPLICA_ID: "1",
    settings.RANK0_HOST: "node0",
    settings.RDZV_PORT: "29600",
    settings.APP_ID: "train-abc",
}


def args(*argv: str, **env: str) -> flags.AgentArgs:
    return flags.parse([*argv, "train.py", "--lr", "1"], env)


@pytest.mark.parametrize(
    "argv, engine",
    [
        ([], "agent"),
        (["--nproc-per-node", "4", "--max-restarts", "3"], "agent"),
        (["--standalone"], "agent"),
        (["--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:29400"], "agent"),
        (["--master-port", "29533"], "agent"),
        (["--nnodes", "2"], "agent"),
        (["--nnodes", "2", "--rdzv-backend", "c10d"], "agent"),
        (["--nnodes", "1:2"], "torchrun"),
        (["--nnodes", "2", "--max-restarts", "1"], "torchrun"),
        (["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "head:29400"], "torchrun"),
        (["--rdzv-backend", "c10d", "--rdzv-endpoint", "otherhost:29400"], "torchrun"),
        (["--rdzv-backend", "etcd"], "torchrun"),
        (["--run-path"], "torchrun"),
        (["--numa-binding", "node"], "torchrun"),
        (["--nproc-per-node", "xpu"], "torchrun"),
        (["--engine", "torchrun"], "torchrun"),
    ],
)
def test_engine(argv: list[str], engine: str) -> None:
    assert choose_engine(args(*argv))[0] == engine


def test_a_c10d_endpoints_hand_over_says_why_as_the_docs_do() -> None:
    # issue 22 #9: a 127.0.0.1 endpoint across 2 nodes handed over as "external"; ddp.md said
    # "an endpoint on another host". The rule and the message agree now, and the agent serves
    # a single node whose endpoint names this machine (its own host name included)
    c10d = ("--rdzv-backend", "c10d", "--rdzv-endpoint")
    engine, why = choose_engine(args("--nnodes", "2", *c10d, "127.0.0.1:29511"))
    assert engine == "torchrun" and "external" not in why and "another host" not in why
    assert why.startswith("--rdzv-backend c10d across 2 nodes assigns node ranks as the nodes join")
    engine, why = choose_engine(args(*c10d, "otherhost:29400"))
    assert (engine, why) == (
        "torchrun",
        "--rdzv-endpoint otherhost:29400 is on another host (an external c10d store)",
    )
    for here in ("127.0.0.1:29400", "[::1]:29400", f"{os.uname().nodename}:29400"):
        assert choose_engine(args(*c10d, here))[0] == "agent", here
    doc = (Path(__file__).resolve().parents[2] / "docs" / "ddp.md").read_text()
    assert "a c10d rendezvous across several nodes" in " ".join(doc.split())


def test_engine_agent_refuses_what_it_cannot_do() -> None:
    with pytest.raises(UsageError, match="elastic"):
        choose_engine(args("--engine", "agent", "--nnodes", "1:4"))


def test_single_node_default_is_localhost_free_port_uuid() -> None:
    plan = plan_node(args("--nproc-per-node", "2"), {})
    assert (plan.master_addr, plan.master_port, plan.run_id) == ("localhost", None, None)
    assert plan.command == (sys.executable, "-u", "train.py", "--lr", "1")
    assert plan.world_size == 2 and [plan.rank(i) for i in range(2)] == [0, 1]


def test_single_node_static_with_a_port_is_torchruns_static() -> None:
    plan = plan_node(args("--master-port", "29533", "--rdzv-id", "x"), {})
    assert (plan.master_addr, plan.master_port, plan.run_id) == ("127.0.0.1", 29533, "x")
    plan = plan_node(args("--rdzv-backend", "c10d", "--rdzv-id", "y"), {})
    assert (plan.master_addr, plan.master_port, plan.run_id) == ("localhost", None, "y")


def test_multi_node_takes_the_backends_rank0_host_port_and_replica_id() -> None:
    plan = plan_node(args("--nnodes", "2", "--nproc-per-node", "4"), NODE1)
    assert (plan.node_rank, plan.master_addr, plan.master_port) == (1, "node0", 29600)
    assert plan.run_id == "train-abc"  # every node names the same run
    assert [plan.rank(i) for i in range(4)] == [4, 5, 6, 7] and plan.world_size == 8


def test_multi_node_flags_beat_the_backends_variables() -> None:
    a = args("--nnodes", "2", "--master-addr", "h", "--master-port", "1234", "--node-rank", "0")
    plan = plan_node(a, NODE1)
    assert (plan.node_rank, plan.master_addr, plan.master_port) == (0, "h", 1234)
    assert plan_node(args("--nnodes", "2"), {}).master_port == 29500  # torchrun's default


def test_node_rank_out_of_range() -> None:
    with pytest.raises(UsageError, match="out of range"):
        plan_node(args("--nnodes", "2"), {settings.REPLICA_ID: "2"})


def test_rank_envs_is_torchruns_contract() -> None:
    envs = rank_envs(
        ["--nproc-per-node", "2", "--role", "trainer", "-m", "pkg.train", "--x"],
        {settings.REPLICA_LOG_DIR: "/logs/r0"},
        python="/py",
    )
    assert [(e["rank"], e["local_rank"]) for e in envs] == [(0, 0), (1, 1)]
    e = envs[1]
    assert e["argv"] == ["/py", "-u", "-m", "pkg.train", "--x"]
    env = e["env"]
    assert {
        k: env[k]
        for k in (
            "RANK",
            "LOCAL_RANK",
            "WORLD_SIZE",
            "LOCAL_WORLD_SIZE",
            "GROUP_RANK",
            "GROUP_WORLD_SIZE",
            "ROLE_RANK",
            "ROLE_NAME",
            "ROLE_WORLD_SIZE",
            "MASTER_ADDR",
            "OMP_NUM_THREADS",
        )
    } == {
        "RANK": "1",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "0",
        "GROUP_WORLD_SIZE": "1",
        "ROLE_RANK": "1",
        "ROLE_NAME": "trainer",
        "ROLE_WORLD_SIZE": "2",
        "MASTER_ADDR": "localhost",
        "OMP_NUM_THREADS": "1",
    }
    assert env["MASTER_PORT"] == "<free port>" and env["TORCHELASTIC_RUN_ID"] == "<uuid4>"
    assert env["TORCHELASTIC_ERROR_FILE"] == "/logs/r0/<uuid4>_<rand>/attempt_0/1/error.json"
    assert env["TORCHELASTIC_USE_AGENT_STORE"] == "True"  # the agent hosts it
    assert env["TORCHELASTIC_SIGNALS_TO_HANDLE"] == "SIGTERM,SIGINT,SIGHUP,SIGQUIT"
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    assert "PYTHONUNBUFFERED" not in env


def test_rank_envs_keeps_inherited_values_and_no_python() -> None:
    replica = {
        "OMP_NUM_THREADS": "4",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0",
        "CUDA_VISIBLE_DEVICES": "2,3",
    }
    env = rank_envs(["--nproc-per-node", "2", "--no-python", "./run.sh"], replica)[0]
    assert env["argv"] == ["./run.sh"]
    assert env["env"]["OMP_NUM_THREADS"] == "4"
    assert env["env"]["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "0"
    assert env["env"]["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_rank_envs_virtual_local_rank_gives_one_gpu_each() -> None:
    envs = rank_envs(
        ["--nproc-per-node", "2", "--virtual-local-rank", "t.py"], {"CUDA_VISIBLE_DEVICES": "4,6"}
    )
    assert [(e["env"]["LOCAL_RANK"], e["env"]["CUDA_VISIBLE_DEVICES"]) for e in envs] == [
        ("0", "4"),
        ("0", "6"),
    ]


def test_rank_envs_second_node() -> None:
    envs = rank_envs(["--nnodes", "2", "--nproc-per-node", "2", "t.py"], NODE1)
    assert [e["rank"] for e in envs] == [2, 3]
    env = envs[0]["env"]
    assert (env["GROUP_RANK"], env["MASTER_ADDR"], env["MASTER_PORT"]) == ("1", "node0", "29600")
    assert env["TORCHELASTIC_RUN_ID"] == "train-abc"


def test_rank_envs_torchrun_engine_elastic_ranks_unknown() -> None:
    envs = rank_envs(["--nnodes", "1:2", "--nproc-per-node", "2", "t.py"], NODE1)
    assert [e["rank"] for e in envs] == [None, None]
    assert all(e["engine"] == "torchrun" for e in envs)
    assert TORCHRUN_ENTRY in envs[0]["launcher"]


def test_torchrun_argv_fills_the_backends_rendezvous() -> None:
    argv = torchrun_argv(
        args("--nnodes", "1:2", "--rdzv-backend", "c10d", "--engine", "torchrun"),
        NODE1,
        "/logs/r1",
        python="/py",
    )
    assert argv[:3] == ["/py", "-c", TORCHRUN_ENTRY]  # torchrun's console script (issue 22 #27)
    assert "--engine" not in argv
    flat = " ".join(argv)
    assert "--rdzv-endpoint node0:29600" in flat and "--rdzv-id train-abc" in flat
    assert "--log-dir /logs/r1" in flat and argv[-3:] == ["train.py", "--lr", "1"]
    static = " ".join(torchrun_argv(args("--nnodes", "2", "--max-restarts", "1"), NODE1, None))
    assert "--node-rank 1 --master-addr node0 --master-port 29600" in static


def test_torchrun_argv_keeps_explicit_flags() -> None:
    a = args("--nnodes", "2", "--max-restarts", "1", "--master-addr", "mine", "--rdzv-id", "mine")
    flat = " ".join(torchrun_argv(a, NODE1, None))
    assert "--master-addr mine" in flat and "--rdzv-id mine" in flat
