"""The preflight's comparison of fingerprints: what differs, on which node, and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from trainlaunch.preflight.compare import compare
from trainlaunch.preflight.options import PreflightOptions
from trainlaunch.preflight.report import Verdict, render

ALL = PreflightOptions()


def fp(rank: int, name: str, **changes: Any) -> dict[str, Any]:
    """A fingerprint as agent + probe report it, for a healthy CPU node."""
    base: dict[str, Any] = {
        "node_rank": rank,
        "node": name,
        "python": "3.11.7",
        "executable": "/venv/bin/python",
        "torch": "2.13.0",
        "torch_path": "/venv/lib/python3.11/site-packages/torch",
        "cuda": None,
        "nccl": None,
        "driver": None,
        "gpus": [],
        "nccl_plugin": None,
        "trainlaunch": "0.1.0",
        "env": {},
        "context": {},
        "ifname": {},
        "interfaces": {"lo": ["127.0.0.1"], "eth0": ["10.0.0.1"]},
        "modules": {"numpy": "/venv/numpy/__init__.py"},
    }
    base.update(changes)
    return base


def test_identical_nodes_have_no_problem() -> None:
    assert compare([fp(0, "n1"), fp(1, "n2")], ALL) == []


def test_a_shadowing_pythonpath_is_named_in_the_fix() -> None:
    odd = fp(
        1,
        "n2",
        torch="2.12.0",
        torch_path="/opt/old/torch",
        context={"PYTHONPATH": "/opt/old:/x"},
    )
    (p,) = compare([fp(0, "n1"), odd], ALL)
    assert (p.node, p.check, p.node_name) == (1, "torch", "n2")
    assert p.fix == "n2: torch 2.12.0 where n1 has 2.13.0 (PYTHONPATH=/opt/old)"
    assert p.found == "2.12.0 (/opt/old/torch)" and p.expected == "2.13.0"


def test_another_interpreter_is_named_when_no_pythonpath_explains_it() -> None:
    odd = fp(1, "n2", python="3.10.1", executable="/usr/bin/python3")
    (p,) = compare([fp(0, "n1"), odd], ALL)
    assert p.fix == (
        "n2: python 3.10.1 where n1 has 3.11.7 (its python is /usr/bin/python3, "
        "theirs /venv/bin/python)"
    )


def test_the_majority_is_the_reference_with_three_nodes() -> None:
    fps = [fp(0, "n1", torch="2.12.0"), fp(1, "n2"), fp(2, "n3")]
    (p,) = compare(fps, ALL)
    assert p.node == 0 and p.fix.startswith("n1: torch 2.12.0 where n2, n3 have 2.13.0")


def test_an_env_var_one_node_sets_differently() -> None:
    fps = [fp(0, "n1", env={"NCCL_DEBUG": "INFO"}), fp(1, "n2", env={})]
    (p,) = compare(fps, ALL)
    assert p.check == "env NCCL_DEBUG" and p.node == 1
    assert p.fix == "n2: NCCL_DEBUG unset where n1 has NCCL_DEBUG=INFO"


def test_preflight_match_chooses_what_must_agree() -> None:
    fps = [fp(0, "n1", env={"NCCL_DEBUG": "INFO"}), fp(1, "n2", torch="2.12.0")]
    only_torch = PreflightOptions(match=("torch",))
    assert [p.check for p in compare(fps, only_torch)] == ["torch"]
    extra = PreflightOptions(match=("env:MY_FLAG",))
    fps = [fp(0, "n1", env={"MY_FLAG": "1"}), fp(1, "n2", env={"MY_FLAG": ""})]
    assert [p.check for p in compare(fps, extra)] == ["env MY_FLAG"]


def test_a_module_found_on_one_node_only() -> None:
    fps = [fp(0, "n1"), fp(1, "n2", modules={"numpy": None})]
    (p,) = compare(fps, ALL)
    assert p.check == "module numpy" and p.node == 1
    assert p.fix == "n2: module numpy not found where n1 has it (/venv/numpy/__init__.py)"


def test_what_every_node_lacks_is_one_problem() -> None:
    fps = [fp(r, f"n{r + 1}", modules={"helpers": None}) for r in range(3)]
    (p,) = compare(fps, ALL)
    assert p.node is None and p.check == "module helpers"
    assert p.fix.startswith("every node: module helpers, which the entrypoint imports, is found")


def test_torch_that_cannot_be_imported_fails_even_where_all_agree() -> None:
    err = "ModuleNotFoundError: No module named 'torch'"
    fps = [fp(r, f"n{r + 1}", torch=None, torch_error=err) for r in range(2)]
    problems = compare(fps, ALL)
    assert [(p.node, p.check) for p in problems] == [(None, "torch")]


def test_nccl_socket_ifname_naming_no_interface_of_the_node() -> None:
    fps = [fp(0, "n1", ifname={"NCCL_SOCKET_IFNAME": "eth"}), fp(1, "n2")]
    fps[1]["ifname"] = {"NCCL_SOCKET_IFNAME": "ib"}
    fps[1]["env"] = fps[0]["env"] = {}
    problems = compare(fps, ALL)
    assert [p.node for p in problems] == [1]
    assert "NCCL_SOCKET_IFNAME=ib matches none of its interfaces (eth0, lo)" in problems[0].fix


@pytest.mark.parametrize(
    ("spec", "ok"),
    [
        ("eth", True),
        ("=eth", False),
        ("=eth0", True),
        ("ib,eth", True),
        ("^lo", True),
        ("ib", False),
    ],
)
def test_ifname_specs_as_nccl_reads_them(spec: str, ok: bool) -> None:
    from trainlaunch.preflight.facts import ifname_matches

    assert ifname_matches(spec, ["lo", "eth0"]) is ok


def test_names_that_repeat_get_the_node_rank() -> None:
    fps = [fp(0, "vm"), fp(1, "vm", torch="2.12.0")]
    (p,) = compare(fps, ALL)
    assert p.fix.startswith("node 1 (vm): torch 2.12.0 where node 0 (vm) has 2.13.0")


def test_the_table_a_failed_preflight_prints() -> None:
    odd = fp(
        1, "n2", torch="2.12.0", torch_path="/opt/old/torch", context={"PYTHONPATH": "/opt/old"}
    )
    problems = compare([fp(0, "n1"), odd], ALL)
    verdict = Verdict(2, tuple(problems), seconds=2.44, names={0: "n1", 1: "n2"})
    assert render(verdict, verdict.labels()).splitlines() == [
        "preflight FAILED: 2 nodes, 1 problem (2.4 s); no rank started",
        "  node  check  found                    expected",
        "  n2    torch  2.12.0 (/opt/old/torch)  2.13.0",
        "  n2: torch 2.12.0 where n1 has 2.13.0 (PYTHONPATH=/opt/old)",
    ]
    again = Verdict.from_dict(verdict.to_dict())
    assert again == verdict and again.bad_nodes() == ["n2"]


def test_a_secret_is_compared_by_digest_never_shown() -> None:
    from trainlaunch.preflight.facts import compared_env

    one = compared_env({"HF_TOKEN": "hf_aaa", "NCCL_DEBUG": "INFO"}, ["HF_TOKEN"])
    two = compared_env({"HF_TOKEN": "hf_bbb"}, ["HF_TOKEN"])
    assert "hf_aaa" not in str(one) and one["HF_TOKEN"].startswith("******** (sha256 ")
    assert one["NCCL_DEBUG"] == "INFO"
    fps = [fp(0, "n1", env={"HF_TOKEN": one["HF_TOKEN"]}), fp(1, "n2", env=two)]
    (p,) = compare(fps, PreflightOptions(match=("env:HF_TOKEN",)))
    assert p.check == "env HF_TOKEN" and "hf_" not in p.fix
