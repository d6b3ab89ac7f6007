"""Random command lines for every subcommand: a documented exit code, never 70, no traceback.

The bulk runs in-process through the one error boundary (`trainlaunch.cli.boundary.main`,
~5 ms a call); a sample goes through the real `python -m trainlaunch` in subprocesses. The
store holds finished apps only and `run` always gets `--dryrun`, so nothing random is ever
started or signalled; scheduler names are limited to local ones (no cluster is touched).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import CLI
from tests.faults.fault_helpers import check_clean_exit, cli_env, run_inprocess
from tests.fuzz.fuzz_strategies import examples, hostile_text
from trainlaunch.cli import COMMANDS

COMPONENT_FILE = """\
from trainlaunch import specs

def fn(msg: str = "x", n: int = 1, flag: bool = False) -> specs.AppDef:
    return specs.AppDef(name="f", roles=(specs.Role(name="f", entrypoint="echo", args=(msg,),
                                                    num_replicas=n),))
"""


class Store:
    """A private store with finished apps, and the tokens that name them."""

    def __init__(self, root: Path) -> None:
        (root / "work").mkdir()
        self.cli = CLI(root / "home", root / "work")
        (self.cli.cwd / "comp.py").write_text(COMPONENT_FILE)
        ok = self.cli.run("utils.echo", "--num-replicas", "2", "--msg", "fuzz")
        bad = self.cli.run("utils.sh", "echo boom >&2; exit 3")
        for h in (ok, bad):
            assert self.cli.wait(h)["is_terminal"]
        ids = [h.rsplit("/", 1)[1] for h in (ok, bad)]
        self.handles = [
            ok,
            bad,
            *ids,
            f"{ids[0]}/echo",
            f"{ids[0]}/echo/0,1",
            f"{ids[0]}/echo/1",
            f"{ids[1]}/sh/0",
            f"{ids[0]}/nosuch",
            "nope-123",
            "local://trainlaunch/nope-123",
            "local:///" + ids[0],
            "local://other/" + ids[1],
            "nosuch://s/x",
            "../x",
            "a/b/c/d",
            "",
        ]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    s = Store(tmp_path_factory.mktemp("clifuzz"))
    saved = list(sys.path)
    with cli_env(s.cli.home, s.cli.cwd):
        yield s
    sys.path[:] = saved  # file components put their directory on sys.path


def _options(name: str) -> list[str]:
    """Every option spelling of a subcommand (generic ones if its module does not import)."""
    try:
        command = importlib.import_module(COMMANDS[name][0]).command
    except Exception:  # noqa: BLE001 - reported by the tests below, not here
        return ["--json", "--help"]
    out = []
    for p in command.params:
        out += [*p.opts, *p.secondary_opts]
    return sorted(set(out) - {"--debug"})


COMPONENTS = [
    "utils.echo",
    "utils.sh",
    "utils.python",
    "utils.binary",
    "utils.sleep",
    "utils.exit",
    "utils.touch",
    "dist.ddp",
    "utils.nosuch",
    "nosuch",
    "utils.",
    "comp.py:fn",
    "./comp.py:fn",
    "comp.py:nosuch",
    "nofile.py:fn",
    "a:b",
    ":",
    ".",
    "/etc/passwd:fn",
    "comp.py",
    "comp:fn",
]
VALUES = [
    "0",
    "1",
    "-1",
    "2",
    "1.5",
    "nan",
    "inf",
    "1e400",
    "9" * 25,
    "true",
    "false",
    "",
    "local",
    "local_cwd",
    "nosuch",
    "LOCAL",
    "grace_period=1",
    "cwd=/nonexistent",
    "gpu_count=x",
    "grace_period=nan",
    "auto_set_cuda_visible_devices=maybe",
    "a=b,c",
    "all_ranks",
    "single_rank",
    "sampled",
    "first_rank_per_node",
    "pkg:name",
    "30s",
    "5m",
    "-2h",
    "2020-01-01T00:00:00",
    "yesterday",
    ".*",
    "[",
    "(?P<",
    "stdout",
    "stderr",
    "combined",
    "SUCCEEDED",
    "failed",
    "running",
    "--msg",
    "--num-replicas",
    "-j",
    "1x2",
    "--script",
    "train.py",
    "-m",
    "--",
    "-",
    "-h",
    "--help",
    "--json",
    "--show-secrets",
    "A=1,B=2",
    "${app_id}",
    "{rank}",
    "metric",
    "out.png",
]


def argv_strategy(name: str, store: Store) -> st.SearchStrategy[list[str]]:
    token = st.one_of(
        st.sampled_from(_options(name)),
        st.sampled_from(VALUES),
        st.sampled_from(store.handles),
        hostile_text(max_size=3),
    )
    if name == "run":
        tokens = st.lists(token | st.sampled_from(COMPONENTS), max_size=8)
        return tokens.map(lambda t: ["run", "--dryrun", *t])
    if name == "rerun":  # like run: argument handling is fuzzed, nothing is launched
        return st.lists(token, max_size=6).map(lambda t: ["rerun", "--dryrun", *t])
    return st.lists(token, max_size=6).map(lambda t: [name, *t])


def _safe(argv: list[str]) -> list[str]:
    return [a for a in argv if a != "--debug"]


def _check_inprocess(argv: list[str]) -> None:
    argv = _safe(argv)
    code, _, err = run_inprocess(argv)
    check_clean_exit(argv, code, err)


# `torchrun` launches in the foreground and has no dry run (torchrun's command line): fuzzing
# it would run arbitrary programs; tests/process/test_torchrun_dropin.py covers its errors.
# `ui` serves until it is interrupted: a valid command line never returns (its bad ports,
# hosts and options: tests/process/test_ui_api.py).
SUBCOMMANDS = [c for c in COMMANDS if c not in ("torchrun", "ui")]


def _subcommand_test(n: int) -> Any:
    @pytest.mark.parametrize("name", SUBCOMMANDS)
    @examples(n)
    @given(data=st.data())
    def test(store: Store, name: str, data: st.DataObject) -> None:
        _check_inprocess(data.draw(argv_strategy(name, store)))

    return test


def _toplevel_test(n: int) -> Any:
    @examples(n)
    @given(
        argv=st.lists(
            st.one_of(
                st.sampled_from([*SUBCOMMANDS, "--version", "--help", "-h", "nosuch", "--json"]),
                st.sampled_from(VALUES),
                hostile_text(max_size=3),
            ),
            max_size=4,
        )
    )
    def test(store: Store, argv: list[str]) -> None:
        if argv and argv[0] == "run":
            argv.insert(1, "--dryrun")
        _check_inprocess(argv)

    return test


test_subcommand_argv = _subcommand_test(25)
test_toplevel_argv = _toplevel_test(40)
test_subcommand_argv_long = pytest.mark.slow(_subcommand_test(150))
test_toplevel_argv_long = pytest.mark.slow(_toplevel_test(400))


def _subprocess_test(n: int) -> Any:
    @examples(n)
    @given(data=st.data())
    def test(store: Store, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(SUBCOMMANDS))
        argv = [a for a in _safe(data.draw(argv_strategy(name, store))) if "\0" not in a]
        proc = subprocess.run(
            [sys.executable, "-m", "trainlaunch", *argv],
            env=store.cli.env,
            cwd=store.cli.cwd,
            capture_output=True,
            timeout=60,
        )
        err = proc.stderr.decode("utf-8", "replace")
        check_clean_exit(argv, proc.returncode, err)

    return test


test_real_cli_argv = _subprocess_test(5)
test_real_cli_argv_long = pytest.mark.slow(_subprocess_test(60))


def test_every_command_module_imports() -> None:
    """COMMANDS is literal (so --help imports nothing); each entry must exist."""
    missing = []
    for name, (module, _) in COMMANDS.items():
        try:
            importlib.import_module(module).command  # noqa: B018
        except (ImportError, AttributeError) as e:
            missing.append(f"{name}: {module}: {e}")
    assert missing == []


def test_the_store_fixture_is_meaningful(store: Store) -> None:
    """The fuzzers reach real apps: known-good command lines succeed."""
    for argv in (
        ["status", store.handles[0]],
        ["logs", store.handles[2]],
        ["list", "--json"],
        ["run", "--dryrun", "comp.py:fn", "--msg", "y"],
        ["wait", store.handles[0]],
    ):
        code, out, err = run_inprocess(argv)
        assert code == 0, (argv, err)


def test_rerun_with_the_components_help_flag_shows_its_help(store: Store) -> None:
    # found by the long fuzz: `rerun H -h` raised the resolver's help request (exit 70)
    for flag in ("-h", "--help"):
        code, out, err = run_inprocess(["rerun", "--dryrun", store.handles[0], flag])
        assert code == 0 and out.startswith("usage: trainlaunch run "), (code, out, err)
