"""The agent's flag table: torchrun 2.13's flags, both spellings, PET_* defaults, rejections."""

from __future__ import annotations

import pytest

from trainlaunch.agent import flags
from trainlaunch.errors import UsageError


def parse(*argv: str, **environ: str) -> flags.AgentArgs:
    return flags.parse(list(argv), environ)


def test_table_matches_torchruns_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    run = pytest.importorskip("torch.distributed.run")
    from torch.distributed.argparse_util import check_env, env

    for name in [k for k in __import__("os").environ if k.startswith("PET_")]:
        monkeypatch.delenv(name)  # torchrun reads PET_* when its parser is built
    theirs = {
        a.dest: a for a in run.get_args_parser()._actions if a.option_strings and a.dest != "help"
    }
    ours = {f.dest: f for f in flags.FLAGS if f.dest not in flags.NOT_TORCHRUNS}
    assert set(ours) == set(theirs)
    for dest, action in theirs.items():
        flag = ours[dest]
        assert flag.options == tuple(action.option_strings), dest
        default = list(flag.default) if flag.kind == "list" else flag.default
        assert default == action.default, dest
        assert flag.env == isinstance(action, (env, check_env)), dest
        assert flag.choices == (tuple(action.choices) if action.choices else None), dest
        assert (flag.kind == "bool") == (action.nargs == 0), dest


@pytest.mark.parametrize("spelling", ["--nproc-per-node", "--nproc_per_node"])
def test_both_spellings(spelling: str) -> None:
    args = parse(spelling, "4", "--max_restarts", "2", "--rdzv-id=abc", "train.py", "--lr", "1")
    assert (args.nproc_per_node, args.max_restarts, args.rdzv_id) == ("4", 2, "abc")
    assert (args.script, args.script_args) == ("train.py", ("--lr", "1"))
    assert args.given == {"nproc_per_node", "max_restarts", "rdzv_id"}


def test_script_args_are_not_parsed_as_flags() -> None:
    args = parse("-m", "pkg.mod", "--nproc-per-node", "8", "-t", "3")
    assert args.module and args.script == "pkg.mod"
    assert args.script_args == ("--nproc-per-node", "8", "-t", "3")
    assert args.nproc_per_node == "1"


def test_defaults_are_torchruns() -> None:
    args = parse("t.py")
    assert (args.nnodes, args.rdzv_backend, args.rdzv_id, args.master_addr) == (
        "1:1",
        "static",
        "none",
        "127.0.0.1",
    )
    assert args.master_port is None and args.tee == "0" and args.engine == "auto"
    assert args.signals_to_handle == "SIGTERM,SIGINT,SIGHUP,SIGQUIT"
    assert args.given == frozenset()


def test_pet_env_fills_unset_flags_and_the_command_line_wins() -> None:
    env = {
        "PET_NPROC_PER_NODE": "3",
        "PET_MAX_RESTARTS": "2",
        "PET_STANDALONE": "1",
        "PET_DUPLICATE_STDOUT_FILTERS": "a,,b,c",
        "PET_ENGINE": "torchrun",
    }
    args = parse("--max-restarts", "5", "t.py", **env)
    assert args.nproc_per_node == "3" and args.max_restarts == 5 and args.standalone is True
    assert args.duplicate_stdout_filters == ("a,b", "c")
    assert args.engine == "auto"  # --engine is trainlaunch's own: no PET_ variable
    assert {"nproc_per_node", "standalone", "max_restarts"} <= args.given
    assert parse("t.py", PET_STANDALONE="0").standalone is False


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--nnodes", "0", "t.py"], "0 < MIN <= MAX"),
        (["--nnodes", "3:2", "t.py"], "0 < MIN <= MAX"),
        (["--nnodes", "a", "t.py"], "N or MIN:MAX"),
        (["--nproc-per-node", "two", "t.py"], "unsupported value 'two'"),
        (["--nproc-per-node", "0", "t.py"], ">= 1"),
        (["-m", "--no-python", "t.py"], "--no-python"),
        (["--max-restarts", "-1", "t.py"], "--max-restarts must be >= 0"),
        (["--max-restarts", "x", "t.py"], "must be an integer"),
        (["--tee", "4", "t.py"], "--tee must be 0-3"),
        (["--redirects", "0:1,x", "t.py"], "--redirects must be 0-3"),
        (["--local-ranks-filter", "0,a", "t.py"], "comma-separated integers"),
        (["--signals-to-handle", "SIGTERM,SIGNOPE", "t.py"], "SIGNOPE"),
        (["--rdzv-conf", "timeout", "t.py"], "KEY=VALUE"),
        (["--start-method", "thread", "t.py"], "spawn, fork, forkserver"),
        (["--engine", "fast", "t.py"], "auto, agent, torchrun"),
        (["--shutdown-timeout", "-2", "t.py"], ">= 0"),
        ([], "training_script"),
    ],
)
def test_torchrun_rejections(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        flags.parse(argv, {})


def test_bad_pet_value_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--max-restarts must be an integer"):
        parse("t.py", PET_MAX_RESTARTS="many")


def test_unambiguous_prefixes_work_as_in_torchrun() -> None:
    assert parse("--rdzv-b", "c10d", "t.py").rdzv_backend == "c10d"


def test_render_round_trips() -> None:
    args = parse(
        "--nproc_per_node",
        "2",
        "--standalone",
        "--duplicate-stderr-filters",
        "x,,y",
        "--tee",
        "3",
        "t.py",
    )
    argv = flags.render(args.values)
    assert argv == [
        "--nproc-per-node",
        "2",
        "--standalone",
        "--tee",
        "3",
        "--duplicate-stderr-filters",
        "x,,y",
    ]
    assert flags.parse([*argv, "t.py"], {}).values == args.values


def test_parse_std() -> None:
    assert flags.parse_std("3", "--tee") == 3
    assert flags.parse_std("0:1,1:2", "--tee") == {0: 1, 1: 2}
