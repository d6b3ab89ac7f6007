"""The preflight's options, its bandwidth judgement, and what a submission asks of the agents."""

from __future__ import annotations

from typing import Any

import pytest

from components import dist
from trainlaunch.agent import flags
from trainlaunch.agent.request import with_preflight
from trainlaunch.errors import UsageError
from trainlaunch.preflight.bandwidth import evaluate
from trainlaunch.preflight.options import FIELDS, PreflightOptions
from trainlaunch.preflight.report import Verdict, render
from trainlaunch.runner import get_runner
from trainlaunch.specs import AppDef, Role


def result(world: float, local: float | None, size: str = "16777216") -> dict[str, Any]:
    return {
        "backend": "nccl",
        "ranks": 16,
        "local_ranks": 8,
        "world": {size: {"seconds": 0.01, "busbw": world}},
        "local": {size: {"seconds": 0.01, "busbw": local}} if local is not None else None,
    }


NAMES = {0: "n1", 1: "n2", 2: "n3"}


def test_a_node_slower_than_the_others_by_the_factor_fails() -> None:
    results = {0: result(90e9, 180e9), 1: result(90e9, 31e9), 2: result(90e9, 175e9)}
    summary, problems = evaluate(results, NAMES, NAMES, 2.0)
    (p,) = problems
    assert (p.node, p.check, p.node_name) == (1, "bandwidth", "n2")
    assert p.fix.startswith("n2: 31 GB/s where the others have 178 GB/s")
    assert summary["per_node"] == {"0": 180e9, "1": 31e9, "2": 175e9}
    assert evaluate(results, NAMES, NAMES, 0.0)[1] == []  # 0: report only
    assert evaluate(results, NAMES, NAMES, 6.0)[1] == []  # 31 * 6 > 177.5


def test_by_default_only_nccl_figures_are_judged() -> None:
    # CPU all-reduces on shared or loaded machines vary by more than 2x between runs
    assert PreflightOptions().slow_factor_for("nccl") == 2.0
    assert PreflightOptions().slow_factor_for("gloo") == 0.0
    assert PreflightOptions(slow_factor=3.0).slow_factor_for("gloo") == 3.0


def test_one_rank_per_node_has_no_per_node_figure_to_compare() -> None:
    summary, problems = evaluate({0: result(1e9, None), 1: result(1e9, None)}, NAMES, NAMES, 2.0)
    assert problems == [] and summary["per_node"] == {}
    verdict = Verdict(2, (), summary, 3.0, "all-reduce", {0: "n1", 1: "n2"})
    assert "all-reduce (nccl, 16 ranks): 16 MiB 1 GB/s" in render(verdict, verdict.labels())


def test_a_failed_all_reduce_names_its_node() -> None:
    _, problems = evaluate(
        {0: result(1e9, 1e9), 1: {"error": "gloo: connect timed out"}}, NAMES, NAMES, 2.0
    )
    assert [(p.node, p.check) for p in problems] == [(1, "all-reduce")]
    assert problems[0].fix == "n2: the all-reduce failed: gloo: connect timed out"


def test_options_from_cfg_become_agent_flags_and_back() -> None:
    assert PreflightOptions.from_cfg({"preflight": False}) is None
    opts = PreflightOptions.from_cfg(
        {"preflight": True, "preflight_match": ["torch", "env:X"], "preflight_timeout": 60.0}
    )
    assert opts == PreflightOptions(("torch", "env:X"), None, 60.0)
    argv = flags.render(opts.flag_values())
    assert argv == [
        "--preflight",
        "--preflight-match",
        "torch,env:X",
        "--preflight-timeout",
        "60.0",
    ]
    args = flags.parse([*argv, "train.py"], {})
    assert PreflightOptions.from_flags(args.values) == opts
    assert (
        PreflightOptions.from_flags(flags.parse(["--preflight", "t.py"], {}).values).match == FIELDS
    )


def test_every_backend_takes_the_options_and_refuses_an_unknown_field() -> None:
    with get_runner() as runner:
        for name in ("local", "slurm", "kubernetes"):
            opts = runner.scheduler_run_opts(name)
            assert {"preflight", "preflight_match", "preflight_timeout"} <= {k for k, _ in opts}
            with pytest.raises(UsageError, match="unknown field 'torhc'"):
                opts.cfg_from_str("preflight_match=torch;torhc", name)
        assert "preflight_exclude_bad_nodes" in runner.scheduler_run_opts("slurm")
        assert "preflight_exclude_bad_nodes" not in runner.scheduler_run_opts("local")


def test_the_flags_go_into_every_node_agent_and_nowhere_else() -> None:
    ddp = dist.ddp("train.py", nnodes="2")
    plain = Role("echo", "echo", ("hi",))
    app = AppDef("mixed", (*ddp.roles, plain))
    out = with_preflight(app, {"preflight": True, "preflight_timeout": 300.0})
    agent, echo = out.roles
    assert agent.args[:3] == ("-m", "trainlaunch.agent", "--preflight")
    assert agent.args[3:] == ddp.roles[0].args[2:]
    assert echo == plain
    assert with_preflight(app, {"preflight": False}) is app
    assert with_preflight(out, {"preflight": True}) == out  # asked once only


def test_an_elastic_app_cannot_have_a_preflight() -> None:
    app = dist.ddp("train.py", nnodes="1:4")
    with pytest.raises(UsageError, match="--preflight needs trainlaunch's own node agent"):
        with_preflight(app, {"preflight": True})


def test_the_probe_imports_only_the_standard_library_and_torch() -> None:
    import ast
    import sys

    from trainlaunch.preflight.probe import probe_source

    tree = ast.parse(probe_source())
    tops = {
        (a.name if isinstance(n, ast.Import) else n.module or "").split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in (n.names if isinstance(n, ast.Import) else [n])
    }
    assert tops - set(sys.stdlib_module_names) - {"__future__"} == {"torch"}
