"""What a new user does by habit, through the real CLI (issue 12, "rough edges").

What starts no process goes through the CLI's entry function in this process (`inprocess_cli`);
apps, pipes and exit codes through a real interpreter go through `cli`.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI, REPO, InProcessCLI, wait_until

COMMANDS = ["run", "status", "logs", "stop", "wait", "list", "describe", "builtins", "runopts"]
COMMANDS += ["metrics"]


def one_error(stderr: str) -> str:
    """The single `error:` line (and no traceback)."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    return lines[0]


# --- 1. global options after the subcommand ---------------------------------------------------


def test_debug_after_the_subcommand_works_like_before_it(inprocess_cli: InProcessCLI) -> None:
    for args in (["--debug", "run", "bad.py:boom"], ["run", "--debug", "bad.py:boom"]):
        proc = inprocess_cli(*args)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" in proc.stderr  # what --debug asks for
        assert "error: component file 'bad.py' not found" in proc.stderr
    plain = inprocess_cli("run", "bad.py:boom")
    assert plain.returncode == 2 and "not found" in one_error(plain.stderr)


def test_a_components_own_debug_is_not_trainlaunchs(inprocess_cli: InProcessCLI) -> None:
    # after the name: the component's (it has none)
    proc = inprocess_cli("run", "utils.echo", "--debug")
    assert proc.returncode == 2
    assert "unknown option --debug for component 'utils.echo'" in one_error(proc.stderr)
    ddp = inprocess_cli("run", "--dryrun", "dist.ddp", "--debug", "-m", "pkg.train", check=True)
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL" in ddp.stdout  # dist.ddp's own --debug


@pytest.mark.parametrize("command", COMMANDS)
def test_every_global_option_works_after_every_subcommand(
    inprocess_cli: InProcessCLI, command: str
) -> None:
    version = inprocess_cli(command, "--version")
    assert version.returncode == 0 and "trainlaunch, version" in version.stdout
    helped = inprocess_cli(command, "-h")
    assert helped.returncode == 0 and "--debug" in helped.stdout
    assert not (inprocess_cli.home).exists()  # none of this touched the store


# --- 2. unknown options of run, unknown commands -----------------------------------------------


@pytest.mark.parametrize(
    "args,needle,hint",
    [
        (["run", "--bogus", "utils.echo"], "unknown option '--bogus' of `trainlaunch run`", ""),
        (["run", "--scheduler_args", "x", "utils.echo"], "--scheduler_args", "'--cfg'"),
        (["run", "--export_strategy", "x", "utils.echo"], "--export_strategy", "--export-strategy"),
        (["wait", "--timout", "5", "x-1"], "unknown option '--timout'", "'--timeout'"),
        (["log", "x-1"], "no command named 'log'", "'logs'"),
        (
            ["--seed", "3", "run", "utils.echo"],
            "'--seed' of `trainlaunch`",
            "trainlaunch run --seed",
        ),
        (["cancel", "x-1"], "no command named 'cancel'", "'stop'"),
        # issue 22 #14: a mistyped command after --json suggested --version
        (
            ["--json", "lgs"],
            "'--json' of `trainlaunch`",
            "put it after the command: trainlaunch logs --json",
        ),
        (
            ["--json", "zzz"],
            "'--json' of `trainlaunch`",
            "put it after the command: trainlaunch COMMAND --json",
        ),
    ],
)
def test_unknown_options_and_commands_say_did_you_mean(
    inprocess_cli: InProcessCLI, args: list[str], needle: str, hint: str
) -> None:
    proc = inprocess_cli(*args)
    assert proc.returncode == 2
    assert needle in one_error(proc.stderr)
    hints = [line for line in proc.stderr.splitlines() if line.startswith("hint:")]
    assert hints and hint in hints[0]
    if args[0] == "run":
        assert "go after its name" in hints[0]  # where a component's option belongs


# --- 3. the seed ---------------------------------------------------------------------------------


def test_dryrun_shows_placeholders_for_what_submission_draws(inprocess_cli: InProcessCLI) -> None:
    drawn = inprocess_cli("run", "--dryrun", "utils.echo", check=True)
    assert "TRAINLAUNCH_SEED=<seed: drawn at submission>" in drawn.stdout
    assert "TRAINLAUNCH_APP_ID=<app-id: assigned at submission>" in drawn.stdout
    assert "TRAINLAUNCH_RDZV_PORT=<port: chosen at submission>" in drawn.stdout
    assert "seed: <seed: drawn at submission>" in drawn.stderr  # the summary
    fixed = inprocess_cli("run", "--dryrun", "--seed", "7", "utils.echo", check=True)
    assert "TRAINLAUNCH_SEED=7" in fixed.stdout and "seed: 7" in fixed.stderr
    doc = json.loads(inprocess_cli("run", "--dryrun", "--json", "utils.echo", check=True).stdout)
    assert doc["app_id"] == "<app-id: assigned at submission>"
    assert doc["replicas"][0]["env"]["TRAINLAUNCH_SEED"] == "<seed: drawn at submission>"
    assert doc["summary"]["seed"] == "<seed: drawn at submission>"


def test_each_app_gets_its_own_recorded_seed(cli: CLI) -> None:
    seeds = []
    for _ in range(2):
        handle = cli.run("utils.sh", "echo seed=$TRAINLAUNCH_SEED")
        cli.wait(handle)
        recorded = json.loads(cli("describe", "--json", handle, check=True).stdout)
        seed = recorded["metadata"]["settings"]["seed"]
        assert isinstance(seed, int)
        assert f"seed={seed}" in cli("logs", "--raw", handle, check=True).stdout
        seeds.append(seed)
    assert seeds[0] != seeds[1]  # 1 in 2**31 to collide


def test_a_run_inside_a_rank_does_not_inherit_the_ranks_seed(cli: CLI) -> None:
    tl = f"{shlex.quote(sys.executable)} -m trainlaunch run --dryrun --json"
    handle = cli.run(
        "--seed",
        "7",
        "utils.sh",
        f'{tl} utils.echo > nested.json && {tl} --seed "$TRAINLAUNCH_SEED" utils.echo > shared.json',
    )
    final = cli.wait(handle)
    assert final["state"] == "SUCCEEDED", cli("logs", handle).stdout
    nested = json.loads((cli.cwd / "nested.json").read_text())
    assert nested["summary"]["seed"] == "<seed: drawn at submission>"
    assert "/apps/<app-id: assigned at submission>/metrics" in json.dumps(nested)  # its own
    assert json.loads((cli.cwd / "shared.json").read_text())["summary"]["seed"] == 7


# --- 4. read-only commands and the store ---------------------------------------------------------


def test_read_only_commands_never_create_the_store(
    inprocess_cli: InProcessCLI, tmp_path: Path
) -> None:
    home = tmp_path / "nonexistent" / "x"
    env = {"TRAINLAUNCH_HOME": str(home)}
    assert inprocess_cli("list", env=env, check=True).stdout == ""
    assert json.loads(inprocess_cli("list", "--json", env=env, check=True).stdout) == []
    for cmd in ("status", "logs", "describe", "wait", "stop", "metrics"):
        proc = inprocess_cli(cmd, "nope-123", env=env)
        assert proc.returncode == 4, (cmd, proc.stderr)
    assert not (tmp_path / "nonexistent").exists()


def test_a_relative_store_is_refused(inprocess_cli: InProcessCLI) -> None:
    proc = inprocess_cli("list", env={"TRAINLAUNCH_HOME": "rel/home"})
    assert proc.returncode == 2
    assert "TRAINLAUNCH_HOME must be an absolute path" in one_error(proc.stderr)
    assert not (inprocess_cli.cwd / "rel").exists()


# --- 5. --json is always one document; the app's exit code --------------------------------------


def test_json_errors_are_one_document_on_stdout(cli: CLI) -> None:
    handle = cli.run("utils.sleep", "--seconds", "60")
    timed_out = cli("wait", "--timeout", "1", "--json", handle)
    assert timed_out.returncode == 7
    doc = json.loads(timed_out.stdout)
    assert doc["exit_code"] == 7 and "still" in doc["error"] and "hint" in doc
    stopped = json.loads(cli("stop", "--json", handle, check=True).stdout)
    assert stopped["state"] == "CANCELLED"
    replica_code = stopped["roles"][0]["replicas"][0]["exit_code"]
    assert replica_code is not None and stopped["exit_code"] == replica_code
    for args, code in (
        (["status", "--json", "nope-1"], 4),
        (["run", "--json", "--bogus", "utils.echo"], 2),
        (["logs", "--json", "nope-1"], 4),
        (["list", "--json", "--state", "nosuch"], 2),
    ):
        proc = cli(*args)
        assert proc.returncode == code
        assert json.loads(proc.stdout)["exit_code"] == code  # exactly one document


def test_wait_json_on_a_failed_app_is_the_status_document_only(cli: CLI) -> None:
    handle = cli.run("utils.sh", "exit 3")
    cli.wait(handle)
    proc = cli("wait", "--json", handle)
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)  # one document: json.loads refuses two
    assert doc["state"] == "FAILED" and doc["exit_code"] == 3


# --- 6. scripts and names ------------------------------------------------------------------------


def test_a_script_given_as_component_suggests_how_to_run_it(inprocess_cli: InProcessCLI) -> None:
    (inprocess_cli.cwd / "mytrain.py").write_text("print('hi')\n")
    proc = inprocess_cli("run", "mytrain.py", "--steps", "3")
    assert proc.returncode == 2
    assert "'mytrain.py' is a script, not a component" in one_error(proc.stderr)
    assert "dist.ddp mytrain.py" in proc.stderr and "utils.python mytrain.py" in proc.stderr


def test_a_local_utils_py_is_named_in_the_hint(inprocess_cli: InProcessCLI) -> None:
    (inprocess_cli.cwd / "utils.py").write_text("def fn():\n    pass\n")
    proc = inprocess_cli("run", "utils.fn")
    assert proc.returncode == 2
    assert "utils.sh" not in proc.stderr
    assert "trainlaunch run utils.py:fn" in proc.stderr
    typo = inprocess_cli("run", "utils.ech")  # a typo of a builtin is still one
    assert "did you mean 'utils.echo'?" in typo.stderr


# --- 7. dist.ddp checks its script on the local backend ------------------------------------------


def test_ddp_script_is_checked_at_submission_on_local(
    inprocess_cli: InProcessCLI, tmp_path: Path
) -> None:
    missing = inprocess_cli("run", "dist.ddp", "--nproc", "2", "nosuch.py")
    assert missing.returncode == 2
    assert "no file 'nosuch.py'" in one_error(missing.stderr)
    assert str(inprocess_cli.cwd / "nosuch.py") in missing.stderr
    assert not (inprocess_cli.home / "apps").exists() or not list(
        (inprocess_cli.home / "apps").iterdir()
    )
    other = tmp_path / "other"
    other.mkdir()
    (other / "train.py").write_text("")
    inprocess_cli("run", "--dryrun", "--cfg", f"cwd={other}", "dist.ddp", "train.py", check=True)
    inprocess_cli("run", "--dryrun", "dist.ddp", str(other / "train.py"), check=True)
    inprocess_cli("run", "--dryrun", "dist.ddp", "-m", "not.checked.here", check=True)
    nopy = inprocess_cli("run", "--dryrun", "dist.ddp", "--no-python", "no-such-program-xyz")
    assert nopy.returncode == 2 and "no command 'no-such-program-xyz' on PATH" in nopy.stderr
    assert inprocess_cli("run", "utils.python", "nosuch.py").returncode == 2
    helped = " ".join(inprocess_cli("run", "dist.ddp", "--help", check=True).stdout.split())
    assert "on Slurm and Kubernetes it is a path on the cluster or in the image" in helped
    assert "``" not in helped


# --- 8. logs: one not-found rule; -f on a failed app ---------------------------------------------


def test_logs_not_found_is_4_and_malformed_is_2_and_follow_exits_0(cli: CLI) -> None:
    handle = cli.run("utils.sh", "echo before-failing; exit 3")
    assert cli.wait(handle)["state"] == "FAILED"
    for target, code in (
        (f"{handle}/sh/5", 4),
        (f"{handle}/nosuch", 4),
        ("local://trainlaunch/nope-1", 4),
        (f"{handle}/sh/x", 2),
    ):
        proc = cli("logs", target)
        assert proc.returncode == code, (target, proc.stderr)
        one_error(proc.stderr)
    followed = cli("logs", "-f", "--raw", handle)
    assert followed.returncode == 0 and followed.stdout.splitlines() == ["before-failing"]
    # issue 22 #15: "it has 0" read as "it has none"
    missing = cli("logs", f"{handle}/sh/5").stderr.splitlines()[0]
    assert missing == "error: role 'sh' has no replica 5; its replicas: 0"


def test_a_config_files_mistake_names_the_file_and_the_table(
    inprocess_cli: InProcessCLI,
) -> None:
    # issue 22 #12: `[scheduler.local] grace_periode = 3` said only "unknown option ..."
    project = inprocess_cli.cwd / ".trainlaunch.toml"
    project.write_text("[scheduler.local]\ngrace_periode = 3\n")
    env = {"TRAINLAUNCH_CONFIG": str(project)}
    for command in (["run"], ["sweep", "--seeds", "1,2"]):
        proc = inprocess_cli(*command, "--dryrun", "utils.echo", env=env)
        assert proc.returncode == 2
        assert one_error(proc.stderr).startswith(
            f"error: {project}: [scheduler.local]: unknown option 'grace_periode' for "
            "scheduler 'local' (did you mean 'grace_period'?)"
        )
    user = inprocess_cli.home / "xdg-config" / "trainlaunch" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("[scheduler.local]\ngrace_period = 'soon'\n")
    proc = inprocess_cli("run", "--dryrun", "utils.echo")
    assert one_error(proc.stderr) == (
        f"error: {user}: [scheduler.local]: option 'grace_period' expects a float, got 'soon'"
    )
    user.unlink()  # on the command line the option is no file's
    proc = inprocess_cli("run", "--dryrun", "--cfg", "grace_periode=1", "utils.echo")
    assert one_error(proc.stderr).startswith("error: unknown option 'grace_periode'")


# --- 9. resources in the dryrun summary ----------------------------------------------------------


def test_dryrun_summary_shows_resources(inprocess_cli: InProcessCLI) -> None:
    (inprocess_cli.cwd / "train.py").write_text("")
    proc = inprocess_cli("run", "--dryrun", "dist.ddp", "--nproc", "2", "train.py", check=True)
    assert "role train: 1 replica, each cpu 2, gpu 0, memory not set" in proc.stderr
    sh = inprocess_cli("run", "--dryrun", "utils.sh", "--memMB", "2048", "true", check=True)
    assert "memory 2048 MiB" in sh.stderr
    doc = json.loads(
        inprocess_cli("run", "--dryrun", "--json", "dist.ddp", "train.py", check=True).stdout
    )
    assert doc["summary"]["roles"] == [
        {"name": "train", "replicas": 1, "cpu": 1, "gpu": 0, "memMB": None}
    ]


# --- 10. shell completion; a CI script ------------------------------------------------------------


def complete(cli: CLI, words: str) -> list[str]:
    env = {
        "_TRAINLAUNCH_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
    }
    out = cli(env=env, check=True).stdout
    return [line.split(",", 1)[1] for line in out.splitlines() if line]


def test_shell_completion(cli: CLI, inprocess_cli: InProcessCLI) -> None:
    assert cli(env={"_TRAINLAUNCH_COMPLETE": "bash_source"}, check=True).stdout.startswith(
        "_trainlaunch_completion()"
    )
    offered = complete(inprocess_cli, "trainlaunch st")
    assert {"status", "stop"} <= set(offered) and all(c.startswith("st") for c in offered)
    assert complete(inprocess_cli, "trainlaunch run --dr") == ["--dryrun"]
    assert "utils.echo" in complete(inprocess_cli, "trainlaunch run --seed 3 ut")
    assert "--streams" in complete(inprocess_cli, "trainlaunch logs --st")
    assert complete(inprocess_cli, "trainlaunch status ") == []  # no store yet: none made
    assert not cli.home.exists()
    app_id = cli.run("utils.echo").rsplit("/", 1)[1]  # the same store as inprocess_cli's
    assert complete(inprocess_cli, "trainlaunch logs ") == [app_id]  # a bare id: a local handle
    assert complete(cli, f"trainlaunch wait {app_id[:3]}") == [app_id]


def test_completion_offers_schedulers_and_a_components_options(
    inprocess_cli: InProcessCLI,
) -> None:
    # issue 22 #20: nothing after -s, nothing for a component's options
    from trainlaunch.schedulers import scheduler_names

    names = scheduler_names()
    assert complete(inprocess_cli, "trainlaunch run -s ") == names
    assert complete(inprocess_cli, "trainlaunch run --scheduler sl") == ["slurm"]
    assert complete(inprocess_cli, "trainlaunch list -s ") == names
    assert complete(inprocess_cli, "trainlaunch sweep -s ") == names
    assert complete(inprocess_cli, "trainlaunch runopts k") == ["kubernetes"]
    offered = complete(inprocess_cli, "trainlaunch run dist.ddp --npr")
    assert offered == ["--nproc-per-node", "--nproc"]
    sweep = "trainlaunch sweep --param lr=0.1,1 dist.ddp --npr"
    assert complete(inprocess_cli, sweep) == offered
    assert complete(inprocess_cli, "trainlaunch run -s local dist.ddp --nproc 2 --rdzv-b") == [
        "--rdzv-backend"
    ]
    assert complete(inprocess_cli, "trainlaunch run dist.ddp --engine a") == ["auto", "agent"]
    assert complete(inprocess_cli, "trainlaunch run --dr") == ["--dryrun"]  # run's own, before
    assert "--msg" in complete(inprocess_cli, "trainlaunch run utils.echo --")
    assert "--dryrun" not in complete(inprocess_cli, "trainlaunch run utils.echo --")


def test_a_ci_script_with_pipefail_and_head(cli: CLI) -> None:
    handle = cli.run("utils.sh", "seq 1 100000")
    cli.wait(handle)
    tl = f"{shlex.quote(sys.executable)} -m trainlaunch"
    script = f"""set -euo pipefail
{tl} logs {handle} | head -n 2
{tl} logs --json {handle} | head -n 1
{tl} list | head -n 1
echo ok
"""
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=cli.env, cwd=cli.cwd
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:2] == ["sh/0 1", "sh/0 2"]
    assert proc.stdout.splitlines()[-1] == "ok" and proc.stderr == ""


def test_the_quickstart_says_how_to_install() -> None:
    text = (REPO / "docs" / "quickstart.md").read_text()
    assert "not published on PyPI" in text and "pip install torch==2.13.0 -e ." in text
    assert (
        'eval "$(_TRAINLAUNCH_COMPLETE=bash_source trainlaunch)"'
        in (REPO / "docs" / "cli.md").read_text()
    )


@pytest.mark.parametrize("page", ["README.md", "docs/quickstart.md"])
def test_the_first_pages_commands_paste_into_bash(page: str) -> None:
    # issue 22 #19: `trainlaunch logs <handle>` pasted is a syntax error; handles go in $h
    for block in re.findall(r"```(?:bash|sh)\n(.*?)```", (REPO / page).read_text(), re.S):
        check = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
        assert check.returncode == 0, f"{page}:\n{block}\n{check.stderr}"


def test_status_exit_code_is_0_for_a_succeeded_app(cli: CLI) -> None:
    handle = cli.run("utils.echo")
    final = wait_until(lambda: (s := cli.status(handle))["is_terminal"] and s)
    assert final["state"] == "SUCCEEDED" and final["exit_code"] == 0
