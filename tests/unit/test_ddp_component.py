"""dist.ddp -> AppDef: one role, one replica per node, the agent's flags, torchrun's checks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainlaunch.agent import flags
from trainlaunch.components import dist
from trainlaunch.components.dist import ddp
from trainlaunch.errors import ComponentError
from trainlaunch.resolver import find_component


def agent_argv(app: object) -> list[str]:
    args = list(app.roles[0].args)  # type: ignore[attr-defined]
    assert args[:2] == ["-m", "trainlaunch.agent"]
    return args[2:]


def test_positional_script_is_torchruns_command_line() -> None:
    app = ddp("train.py", "--lr", "0.1", nproc_per_node="4")
    role = app.roles[0]
    assert (app.name, role.name, role.num_replicas, role.min_replicas) == (
        "train",
        "train",
        1,
        None,
    )
    assert role.entrypoint == sys.executable
    assert agent_argv(app) == ["--nproc-per-node", "4", "--tee", "3", "train.py", "--lr", "0.1"]
    assert role.resource.cpu == 4  # one CPU per worker unless --cpu says otherwise
    parsed = flags.parse(agent_argv(app), {})
    assert (parsed.script, parsed.script_args, parsed.nproc_per_node) == (
        "train.py",
        ("--lr", "0.1"),
        "4",
    )


def test_module_and_script_keyword() -> None:
    app = ddp("--x", m="pkg.trainer", j="2x3")
    assert app.name == "trainer" and app.roles[0].num_replicas == 2
    assert agent_argv(app) == [
        "--nnodes",
        "2",
        "--nproc-per-node",
        "3",
        "--module",
        "--tee",
        "3",
        "pkg.trainer",
        "--x",
    ]
    assert agent_argv(ddp(script="a/b/my-train.py"))[-1] == "a/b/my-train.py"
    assert ddp(script="a/b/my train.py").name == "my-train"


def test_elastic_nnodes_sets_min_replicas() -> None:
    role = ddp("t.py", nnodes="2:4").roles[0]
    assert (role.num_replicas, role.min_replicas) == (4, 2)
    assert ddp("t.py", j="1:3x2").roles[0].min_replicas == 1


@pytest.mark.parametrize(
    "j, nodes, nproc", [("4", "1:1", "4"), ("2x8", "2", "8"), ("1:2x4", "1:2", "4")]
)
def test_parse_j(j: str, nodes: str, nproc: str) -> None:
    app = ddp("t.py", j=j)
    parsed = flags.parse(agent_argv(app), {})
    assert (parsed.nnodes, parsed.nproc_per_node) == (nodes, nproc)


def test_pet_variables_fill_defaults_and_explicit_values_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PET_NPROC_PER_NODE", "3")
    monkeypatch.setenv("PET_NNODES", "2")
    monkeypatch.setenv("PET_MAX_RESTARTS", "2")
    app = ddp("t.py")
    assert app.roles[0].num_replicas == 2  # only the component can size the app
    parsed = flags.parse(agent_argv(app), {})
    assert (parsed.nproc_per_node, parsed.max_restarts) == ("3", 2)
    assert flags.parse(agent_argv(ddp("t.py", nproc_per_node="5")), {}).nproc_per_node == "5"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"nnodes": "0"}, "0 < MIN <= MAX"),
        ({"m": "x", "no_python": True}, "--no-python"),
        ({"nproc_per_node": "lots"}, "unsupported value 'lots'"),
        ({"j": "2y3"}, "-j must be"),
        ({"j": "0x2"}, "-j must be"),
        ({"j": "2x2", "nproc_per_node": "2"}, "either -j or"),
        ({"tee": "7"}, "--tee must be"),
        ({"max_restarts": -1}, "--max-restarts"),
        ({"node_rank": 1}, "out of range for --nnodes 1:1"),
        ({"standalone": True, "nnodes": "2"}, "single-node"),
        ({"signals_to_handle": "SIGTERM,NOPE"}, "NOPE"),
        ({"script": "a.py", "m": "b"}, "either --script or -m"),
    ],
)
def test_rejections(kwargs: dict, message: str) -> None:
    args = () if "m" in kwargs or "script" in kwargs else ("t.py",)
    with pytest.raises(ComponentError, match=message):
        ddp(*args, **kwargs)


def test_no_script_is_an_error_with_a_hint() -> None:
    with pytest.raises(ComponentError, match="no training script") as e:
        ddp()
    assert "dist.ddp --nproc 2 train.py" in (e.value.hint or "")


def test_env_debug_name_image_python() -> None:
    role = ddp("t.py", debug=True, env={"LOGLEVEL": "WARNING", "A": "1"}).roles[0]
    assert role.env["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL" and role.env["NCCL_DEBUG"] == "INFO"
    assert role.env["LOGLEVEL"] == "WARNING" and role.env["A"] == "1"  # the user's env wins
    assert "TORCH_DISTRIBUTED_DEBUG" not in ddp("t.py").roles[0].env
    app = ddp("t.py", name="exp/trainer", image="img:1", cpu=7, gpu=2, max_retries=3)
    role = app.roles[0]
    assert (app.name, role.name, role.entrypoint, role.image) == (
        "exp",
        "trainer",
        "python",
        "img:1",
    )
    assert (role.resource.cpu, role.resource.gpu, role.max_retries) == (7, 2, 3)
    assert ddp("t.py", python="/opt/py/bin/python3").roles[0].entrypoint == "/opt/py/bin/python3"


def test_every_torchrun_flag_is_a_parameter_and_aliases_point_at_parameters() -> None:
    import inspect

    params = set(inspect.signature(ddp).parameters)
    assert {f.dest for f in flags.FLAGS} - {"module"} <= params  # -m is the parameter m
    assert set(dist.ALIASES.values()) <= params


def test_through_the_resolver() -> None:
    comp = find_component("dist.ddp")
    app = comp.materialize(["--nproc", "2", "-t", "0", "train.py", "--lr", "0.1"])
    assert agent_argv(app) == ["--nproc-per-node", "2", "train.py", "--lr", "0.1"]
    app = comp.materialize(["-j", "2x2", "--module", "pkg.m", "--", "--lr", "1"])
    assert app.roles[0].num_replicas == 2 and agent_argv(app)[-3:] == ["pkg.m", "--lr", "1"]


def test_component_and_agent_never_import_torch() -> None:
    code = (
        "import sys, trainlaunch.components.dist, trainlaunch.agent.main, trainlaunch.agent.node, "
        "trainlaunch.agent.plan; trainlaunch.components.dist.ddp('t.py', nproc_per_node='2'); "
        "heavy = [m for m in ('torch', 'numpy') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
