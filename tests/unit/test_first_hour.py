"""The pure rules behind issue 12's rough edges: exit codes, seeds, option ownership, names."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.dist import ddp
from trainlaunch import settings, store
from trainlaunch.cli import cli
from trainlaunch.cli.argv import trainlaunch_options
from trainlaunch.cli.dryrun import with_placeholders
from trainlaunch.config import load_config
from trainlaunch.errors import ComponentError, UsageError
from trainlaunch.resolver.docstrings import parse_docstring
from trainlaunch.resolver.finder import resolve
from trainlaunch.schedulers.slurm.render import render_script
from trainlaunch.specs import PROGRAM, AppDef, AppState, AppStatus, ReplicaStatus, RoleStatus


def status(state: AppState, *codes: int | None) -> AppStatus:
    reps = tuple(
        ReplicaStatus(id=i, state=state, role="r", exit_code=c) for i, c in enumerate(codes)
    )
    return AppStatus(state=state, roles=(RoleStatus("r", reps),))


@pytest.mark.parametrize(
    "state,codes,expected",
    [
        (AppState.SUCCEEDED, (0, 0), 0),
        (AppState.CANCELLED, (143, 143), 143),
        (AppState.CANCELLED, (0, 137), 137),
        (AppState.CANCELLED, (None,), None),  # stopped before anything started
        (AppState.FAILED, (0, 3), 3),
        (AppState.RUNNING, (None, 3), None),  # not ended: no app-level code yet
    ],
)
def test_app_exit_code_rule(state: AppState, codes: tuple[int | None, ...], expected: int) -> None:
    assert status(state, *codes).exit_code == expected


def test_a_backends_own_exit_code_wins() -> None:
    assert AppStatus(state=AppState.FAILED, exit_code=9).exit_code == 9


@pytest.mark.parametrize(
    "argv,own",
    [
        (["--debug", "run", "x"], {"--debug"}),
        (["run", "--debug", "x"], {"--debug"}),
        (["run", "x", "--debug", "--json"], set()),  # the component's
        (["run", "-s", "--json", "x"], {"-s"}),  # -s takes a value, even '--json'
        (["run", "--seed", "3", "--json", "x", "--debug"], {"--seed", "--json"}),
        (["status", "H", "--json"], {"--json"}),  # no component: options may follow
        (["logs", "--", "--json"], set()),
        (["nosuch", "--json"], set()),
        (["torchrun", "--debug", "x.py"], set()),  # torchrun's line is torchrun's
    ],
)
def test_whose_option_is_it(argv: list[str], own: set[str]) -> None:
    assert trainlaunch_options(cli, argv) == own


def test_a_rank_settings_environment_is_not_a_nested_runs_default() -> None:
    env = {settings.SEED: "7", settings.METRICS_PATH: "/x/", settings.CONFIG: ""}
    assert load_config(environ=env).run_settings()["seed"] == 7  # a user's shell: honoured
    inside = {**env, settings.HANDLE: "local://trainlaunch/parent-abc"}
    got = load_config(environ=inside).run_settings()
    assert got["seed"] is None and got["metrics_path"] is None


def test_placeholders_replace_whole_values_only() -> None:
    drawn = {"port": "4094", "app_id": "echo-abc"}
    text = "P=4094 Q=40949 /apps/echo-abc/x echo-abcd"
    assert with_placeholders(text, drawn) == (
        "P=<port: chosen at submission> Q=40949 /apps/<app-id: assigned at submission>/x echo-abcd"
    )
    assert with_placeholders({"a": ["4094", 4094]}, drawn) == {
        "a": ["<port: chosen at submission>", 4094]
    }


def test_scripts_are_not_components(tmp_path: Path) -> None:
    (tmp_path / "mytrain.py").write_text("def py():\n    pass\n")
    with pytest.raises(ComponentError, match="is a script, not a component") as e:
        resolve("mytrain.py", str(tmp_path))
    assert "dist.ddp mytrain.py" in (e.value.hint or "")


def test_rst_literals_render_as_plain_code() -> None:
    desc, params = parse_docstring("Run ``x``.\n\nArgs:\n    a: like ``python -m``\n")
    assert desc == "Run `x`." and params == {"a": "like `python -m`"}


def test_store_readers_create_nothing(tmp_path: Path) -> None:
    env = {settings.HOME: str(tmp_path / "a" / "b")}
    assert store.existing_apps_dir(env) is None
    assert store.app_dir("echo-abc", env) == tmp_path / "a" / "b" / "apps" / "echo-abc"
    assert not (tmp_path / "a").exists()
    assert store.create_app_dir("echo-abc", env).is_dir()
    assert store.existing_apps_dir(env) == tmp_path / "a" / "b" / "apps"
    with pytest.raises(UsageError, match="absolute"):
        store.store_root({settings.HOME: "relative/home"})
    assert store.store_root({settings.HOME: "~/tl"}).is_absolute()


def test_ddp_asks_for_no_memory_and_names_its_script() -> None:
    app = ddp("train.py", nnodes="2")
    role = app.roles[0]
    assert role.resource.memMB == 0 and role.metadata[PROGRAM] == {"path": "train.py"}
    assert ddp(m="pkg.train").roles[0].metadata.get(PROGRAM) is None
    assert ddp("prog", no_python=True).roles[0].metadata[PROGRAM] == {"command": "prog"}
    assert ddp("train.py", memMB=4096).roles[0].resource.memMB == 4096
    script = render_script(AppDef("t", app.roles), {}, "s", "/jobs/${app_id}")
    assert "--mem" not in script  # the cluster's default applies
