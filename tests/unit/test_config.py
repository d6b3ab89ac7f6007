"""Config files: discovery, schema, and precedence cli > env > project > user > default."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from trainlaunch.config import Config, find_project_file, load_config, user_config_path
from trainlaunch.errors import UsageError


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fake $HOME whose user file is empty until a test writes it."""
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository root (it has .git) with a subdirectory to start searches from."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "src" / "deep").mkdir(parents=True)
    return root


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def user_file(home: Path, text: str) -> Path:
    return write(home / ".config" / "trainlaunch" / "config.toml", text)


def load(cwd: Path, home: Path, **env: str) -> Config:
    return load_config(str(cwd), {"HOME": str(home), **env})


# --- discovery ------------------------------------------------------------------------------


def test_no_files_means_builtin_defaults(project: Path, home: Path) -> None:
    cfg = load(project, home)
    assert cfg.sources == ()
    assert cfg.default_scheduler() == "local"
    assert cfg.scheduler_cfg("slurm") == {} and cfg.component_defaults("utils.echo") == {}
    assert cfg.run_settings({}) == {
        "seed": None,
        "export_strategy": "all_ranks",
        "export_rank": 0,
        "export_sample_rate": 1.0,
        "metrics_path": None,
    }


def test_project_file_is_found_from_a_subdirectory(project: Path, home: Path) -> None:
    f = write(project / ".trainlaunch.toml", "[run]\nseed = 1\n")
    cfg = load(project / "src" / "deep", home)
    assert cfg.sources == (str(f),)
    assert cfg.run_settings({})["seed"] == 1


def test_pyproject_tool_table(project: Path, home: Path) -> None:
    write(
        project / "pyproject.toml",
        """
        [project]
        name = "x"
        [tool.trainlaunch.run]
        seed = 2
        [tool.trainlaunch.scheduler.slurm]
        partition = "gpu"
    """,
    )
    cfg = load(project / "src", home)
    assert cfg.run_settings({})["seed"] == 2
    assert cfg.scheduler_cfg("slurm") == {"partition": "gpu"}


def test_pyproject_without_the_table_is_skipped(project: Path, home: Path) -> None:
    write(project / ".trainlaunch.toml", "[run]\nseed = 3\n")
    write(project / "src" / "pyproject.toml", "[project]\nname = 'sub'\n")
    assert load(project / "src" / "deep", home).run_settings({})["seed"] == 3


def test_dot_file_wins_over_pyproject_in_one_directory(project: Path, home: Path) -> None:
    write(project / ".trainlaunch.toml", "[run]\nseed = 4\n")
    write(project / "pyproject.toml", "[tool.trainlaunch.run]\nseed = 5\n")
    assert load(project, home).run_settings({})["seed"] == 4


def test_nearest_project_file_wins(project: Path, home: Path) -> None:
    write(project / ".trainlaunch.toml", "[run]\nseed = 6\n")
    write(project / "src" / ".trainlaunch.toml", "[run]\nseed = 7\n")
    assert load(project / "src" / "deep", home).run_settings({})["seed"] == 7


def test_search_stops_at_the_repository_root(tmp_path: Path, project: Path, home: Path) -> None:
    write(tmp_path / ".trainlaunch.toml", "[run]\nseed = 8\n")  # above the .git boundary
    assert find_project_file(project / "src") is None
    assert load(project / "src", home).sources == ()


def test_explicit_project_file(project: Path, home: Path, tmp_path: Path) -> None:
    write(project / ".trainlaunch.toml", "[run]\nseed = 9\n")
    other = write(tmp_path / "ci.toml", "[run]\nseed = 10\n")
    assert load(project, home, TRAINLAUNCH_CONFIG=str(other)).run_settings({})["seed"] == 10
    assert load(project, home, TRAINLAUNCH_CONFIG="").sources == ()


def test_explicit_project_file_relative_to_cwd(project: Path, home: Path) -> None:
    write(project / "conf" / "a.toml", "[run]\nseed = 11\n")
    assert load(project, home, TRAINLAUNCH_CONFIG="conf/a.toml").run_settings({})["seed"] == 11


def test_explicit_project_file_that_does_not_exist(project: Path, home: Path) -> None:
    with pytest.raises(
        UsageError, match="TRAINLAUNCH_CONFIG names 'nope.toml', which is not a file"
    ):
        load(project, home, TRAINLAUNCH_CONFIG="nope.toml")


def test_explicit_pyproject_needs_the_table(project: Path, home: Path) -> None:
    f = write(project / "pyproject.toml", "[project]\nname = 'x'\n")
    with pytest.raises(UsageError, match=r"no \[tool.trainlaunch\] table"):
        load(project, home, TRAINLAUNCH_CONFIG=str(f))


def test_user_file_locations(tmp_path: Path, home: Path) -> None:
    assert user_config_path({"HOME": str(home)}) == home / ".config/trainlaunch/config.toml"
    xdg = tmp_path / "xdg"
    assert (
        user_config_path({"HOME": str(home), "XDG_CONFIG_HOME": str(xdg)})
        == xdg / "trainlaunch/config.toml"
    )
    assert (
        user_config_path({"HOME": str(home), "XDG_CONFIG_HOME": "relative"})
        == home / ".config/trainlaunch/config.toml"
    )  # the XDG spec ignores relative values
    f = write(xdg / "trainlaunch" / "config.toml", "[run]\nseed = 12\n")
    cfg = load_config(str(tmp_path), {"HOME": str(home), "XDG_CONFIG_HOME": str(xdg)})
    assert cfg.sources == (str(f),) and cfg.run_settings({})["seed"] == 12


# --- precedence -----------------------------------------------------------------------------

LEVELS = ["default", "user", "project", "env", "cli"]
VALUES = {
    "seed": {"user": 1, "project": 2, "env": "3", "cli": 4, "want": [None, 1, 2, 3, 4]},
    "export_strategy": {
        "user": "sampled",
        "project": "single_rank",
        "env": "first_rank_per_node",
        "cli": "all_ranks",
        "want": ["all_ranks", "sampled", "single_rank", "first_rank_per_node", "all_ranks"],
    },
    "export_rank": {"user": 1, "project": 2, "env": "-1", "cli": 3, "want": [0, 1, 2, -1, 3]},
    "export_sample_rate": {
        "user": 0.25,
        "project": 0.5,
        "env": "0.75",
        "cli": 0.0,
        "want": [1.0, 0.25, 0.5, 0.75, 0.0],
    },
    "metrics_path": {
        "user": "u",
        "project": "p",
        "env": "e",
        "cli": "c",
        "want": [None, "u", "p", "e", "c"],
    },
}
ENV_NAMES = {
    "seed": "TRAINLAUNCH_SEED",
    "export_strategy": "TRAINLAUNCH_EXPORT_STRATEGY",
    "export_rank": "TRAINLAUNCH_EXPORT_RANK",
    "export_sample_rate": "TRAINLAUNCH_EXPORT_SAMPLE_RATE",
    "metrics_path": "TRAINLAUNCH_METRICS_PATH",
}


def _toml(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


@pytest.mark.parametrize("key", list(VALUES))
@pytest.mark.parametrize("top", range(len(LEVELS)))
def test_run_setting_precedence(key: str, top: int, project: Path, home: Path) -> None:
    """Each level set up to `top` (inclusive); the highest one wins."""
    spec = VALUES[key]
    present = LEVELS[1 : top + 1]
    if "user" in present:
        user_file(home, f"[run]\n{key} = {_toml(spec['user'])}\n")
    if "project" in present:
        write(project / ".trainlaunch.toml", f"[run]\n{key} = {_toml(spec['project'])}\n")
    env = {ENV_NAMES[key]: str(spec["env"])} if "env" in present else {}
    cfg = load(project, home, **env)
    cli = {key: spec["cli"] if "cli" in present else None}
    value, origin = cfg.run_settings_with_origin(cli)[key]
    assert value == spec["want"][top]
    assert type(value) is type(spec["want"][top])
    assert origin.startswith(
        {
            "default": "default",
            "user": str(home),
            "project": str(project),
            "env": "environment",
            "cli": "command line",
        }[LEVELS[top]]
    )


def test_default_scheduler_precedence(project: Path, home: Path) -> None:
    assert load(project, home).default_scheduler() == "local"
    user_file(home, '[run]\nscheduler = "slurm"\n')
    assert load(project, home).default_scheduler() == "slurm"
    write(project / ".trainlaunch.toml", '[run]\nscheduler = "kubernetes"\n')
    assert load(project, home).default_scheduler() == "kubernetes"
    assert load(project, home, TRAINLAUNCH_SCHEDULER="local").default_scheduler() == "local"


def test_scheduler_options_merge_per_key(project: Path, home: Path) -> None:
    user_file(
        home,
        '[scheduler.slurm]\npartition = "user"\naccount = "me"\n[scheduler.k8s]\nnamespace = "u"\n',
    )
    write(
        project / ".trainlaunch.toml",
        '[scheduler.slurm]\npartition = "gpu"\n[scheduler.kubernetes]\nqueue = "q"\n',
    )
    cfg = load(project, home)
    assert cfg.scheduler_cfg("slurm") == {"partition": "gpu", "account": "me"}
    assert cfg.scheduler_cfg("k8s") == {"namespace": "u", "queue": "q"}  # aliases merge


def test_component_defaults_merge_per_key(project: Path, home: Path) -> None:
    user_file(home, '[component."utils.echo"]\nmsg = "user"\nnum_replicas = 2\n')
    write(project / ".trainlaunch.toml", '[component."utils.echo"]\nmsg = "project"\n')
    cfg = load(project, home)
    assert cfg.component_defaults("utils.echo") == {"msg": "project", "num_replicas": 2}
    assert cfg.sources == (
        str(project / ".trainlaunch.toml"),
        str(home / ".config/trainlaunch/config.toml"),
    )


def test_explicit_command_line_argument_beats_config(project: Path, home: Path) -> None:
    """TorchX #1389: config values clobbered explicitly typed component arguments."""
    from trainlaunch.resolver import find_component

    write(
        project / ".trainlaunch.toml",
        '[component."utils.echo"]\nmsg = "from config"\nnum_replicas = 3\n',
    )
    cfg = load(project, home)
    echo = find_component("utils.echo")
    app = echo.materialize(["--msg", "from cli"], cfg.component_defaults("utils.echo"))
    assert app.roles[0].args == ("from cli",) and app.roles[0].num_replicas == 3
    app = echo.materialize([], cfg.component_defaults("utils.echo"))
    assert app.roles[0].args == ("from config",)


def test_user_and_project_file_being_the_same_file_is_read_once(home: Path, project: Path) -> None:
    f = user_file(home, "[run]\nseed = 1\n")
    assert load(project, home, TRAINLAUNCH_CONFIG=str(f)).sources == (str(f),)


# --- schema and errors ----------------------------------------------------------------------


def test_unknown_top_level_key_names_file_and_key(project: Path, home: Path) -> None:
    f = write(project / ".trainlaunch.toml", "[runn]\nseed = 1\n")
    with pytest.raises(UsageError) as e:
        load(project, home)
    assert str(e.value) == f"{f}: unknown key 'runn'"
    assert "did you mean 'run'?" in (e.value.hint or "")


def test_unknown_run_key_in_pyproject(project: Path, home: Path) -> None:
    f = write(project / "pyproject.toml", "[tool.trainlaunch.run]\nsed = 1\n")
    with pytest.raises(UsageError) as e:
        load(project, home)
    assert str(e.value) == f"{f}: unknown key 'tool.trainlaunch.run.sed'"
    assert "seed" in (e.value.hint or "")


def test_unknown_key_in_the_user_file(project: Path, home: Path) -> None:
    f = user_file(home, "colour = 'red'\n")
    with pytest.raises(UsageError, match=f"^{f}: unknown key 'colour'$"):
        load(project, home)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[run]\nseed = "x"\n', "run.seed must be int, got 'x'"),
        ("[run]\nseed = true\n", "run.seed must be int, got True"),
        ("[run]\nseed = -1\n", "run.seed: seed must be >= 0, got -1"),
        ('[run]\nexport_strategy = "bogus"\n', "run.export_strategy: unknown export strategy"),
        (
            "[run]\nexport_sample_rate = 2\n",
            "run.export_sample_rate: export sample rate must be in [0, 1]",
        ),
        ('[run]\nscheduler = ""\n', "run.scheduler must not be empty"),
        ("run = 3\n", "run must be a table, got int"),
        ("[scheduler]\nslurm = 1\n", "scheduler.slurm must be a table of options"),
        ("[scheduler.slurm]\nnested = [1, 2]\n", "scheduler.slurm.nested must be a string, number"),
        ("[component]\nx = 1\n", 'component."x" must be a table of argument defaults'),
    ],
)
def test_bad_values_name_the_file_and_key(
    text: str, message: str, project: Path, home: Path
) -> None:
    f = write(project / ".trainlaunch.toml", text)
    with pytest.raises(UsageError) as e:
        load(project, home)
    assert str(e.value).startswith(f"{f}: ")
    assert message in str(e.value)


def test_top_level_scheduler_string_hints_at_run(project: Path, home: Path) -> None:
    write(project / ".trainlaunch.toml", 'scheduler = "slurm"\n')
    with pytest.raises(UsageError) as e:
        load(project, home)
    assert "scheduler must be a table" in str(e.value)
    assert e.value.hint == 'the default scheduler is set in [run]: scheduler = "..."'


def test_unquoted_dotted_component_name(project: Path, home: Path) -> None:
    write(project / ".trainlaunch.toml", "[component.utils.echo]\nmsg = 'x'\n")
    with pytest.raises(UsageError) as e:
        load(project, home)
    assert "[component.utils.echo] splits the component name at its dot" in str(e.value)
    assert e.value.hint == 'quote the name: [component."utils.echo"]'


def test_malformed_toml_names_file_and_line(project: Path, home: Path) -> None:
    f = write(project / ".trainlaunch.toml", "[run]\nseed = 1\nseed = = 2\n")
    with pytest.raises(UsageError) as e:
        load(project, home)
    assert str(e.value).startswith(f"{f}: invalid TOML: ")
    assert "line 3" in str(e.value) and "\n" not in str(e.value)


def test_malformed_pyproject_is_reported_while_searching(project: Path, home: Path) -> None:
    f = write(project / "pyproject.toml", "[tool\n")
    with pytest.raises(UsageError, match=f"^{f}: invalid TOML: .*line 1"):
        load(project / "src", home)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"TRAINLAUNCH_SEED": "abc"}, "TRAINLAUNCH_SEED must be an integer, got 'abc'"),
        (
            {"TRAINLAUNCH_EXPORT_SAMPLE_RATE": "x"},
            "TRAINLAUNCH_EXPORT_SAMPLE_RATE must be a number",
        ),
        (
            {"TRAINLAUNCH_EXPORT_STRATEGY": "nope"},
            "TRAINLAUNCH_EXPORT_STRATEGY: unknown export strategy 'nope'",
        ),
    ],
)
def test_bad_environment_values_name_the_variable(
    env: dict[str, str], message: str, project: Path, home: Path
) -> None:
    with pytest.raises(UsageError) as e:
        load(project, home, **env).run_settings({})
    assert message in str(e.value)


def test_empty_environment_values_count_as_unset(project: Path, home: Path) -> None:
    write(project / ".trainlaunch.toml", "[run]\nseed = 5\n")
    cfg = load(project, home, TRAINLAUNCH_SEED="", TRAINLAUNCH_SCHEDULER=" ")
    assert cfg.run_settings({})["seed"] == 5 and cfg.default_scheduler() == "local"


def test_bad_command_line_value_is_named(project: Path, home: Path) -> None:
    with pytest.raises(UsageError, match="^--export-sample-rate: export sample rate must be in"):
        load(project, home).run_settings({"export_sample_rate": 3.0})


def test_unknown_run_setting_from_the_caller_is_a_bug(project: Path, home: Path) -> None:
    with pytest.raises(ValueError, match="unknown run settings"):
        load(project, home).run_settings({"sede": 1})


def test_environment_is_not_in_the_repr(project: Path, home: Path) -> None:
    assert "HOME" not in repr(load(project, home, SECRET_TOKEN="x"))


def test_config_module_imports_nothing_heavy() -> None:
    import subprocess

    code = (
        "import sys, trainlaunch.config; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'numpy', 'click', 'rich', 'components')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
