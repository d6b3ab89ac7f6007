"""What a new user does by habit, through the real CLI (issue 12, "rough edges")."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI, REPO, wait_until

COMMANDS = ["run", "status", "logs", "stop", "wait", "list", "describe", "builtins", "runopts"]
COMMANDS += ["metrics"]


def one_error(stderr: str) -> str:
    """The single `error:` line (and no traceback)."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    return lines[0]


# --- 1. global options after the subcommand ---------------------------------------------------


def test_debug_after_the_subcommand_works_like_before_it(cli: CLI) -> None:
    for args in (["--debug", "run", "bad.py:boom"], ["run", "--debug", "bad.py:boom"]):
        proc = cli(*args)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" in proc.stderr  # what --debug asks for
        assert "error: component file 'bad.py' not found" in proc.stderr
    plain = cli("run", "bad.py:boom")
    assert plain.returncode == 2 and "not found" in one_error(plain.stderr)


def test_a_components_own_debug_is_not_trainlaunchs(cli: CLI) -> None:
    proc = cli("run", "utils.echo", "--debug")  # after the name: the component's (it has none)
    assert proc.returncode == 2
    assert "unknown option --debug for component 'utils.echo'" in one_error(proc.stderr)
    ddp = cli("run", "--dryrun", "dist.ddp", "--debug", "-m", "pkg.train", check=True)
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL" in ddp.stdout  # dist.ddp's own --debug


@pytest.mark.parametrize("command", COMMANDS)
def test_every_global_option_works_after_every_subcommand(cli: CLI, command: str) -> None:
    version = cli(command, "--version")
    assert version.returncode == 0 and "trainlaunch, version" in version.stdout
    helped = cli(command, "-h")
    assert helped.returncode == 0 and "--debug" in helped.stdout
    assert not (cli.home).exists()  # none of this touched the store


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
    ],
)
def test_unknown_options_and_commands_say_did_you_mean(
    cli: CLI, args: list[str], needle: str, hint: str
) -> None:
    proc = cli(*args)
    assert proc.returncode == 2
    assert needle in one_error(proc.stderr)
    hints = [line for line in proc.stderr.splitlines() if line.startswith("hint:")]
    assert hints and hint in hints[0]
    if args[0] == "run":
        assert "go after its name" in hints[0]  # where a component's option belongs


# --- 3. the seed ---------------------------------------------------------------------------------


def test_dryrun_shows_placeholders_for_what_submission_draws(cli: CLI) -> None:
    drawn = cli("run", "--dryrun", "utils.echo", check=True)
    assert "TRAINLAUNCH_SEED=<seed: drawn at submission>" in drawn.stdout
    assert "TRAINLAUNCH_APP_ID=<app-id: assigned at submission>" in drawn.stdout
    assert "TRAINLAUNCH_RDZV_PORT=<port: chosen at submission>" in drawn.stdout
    assert "seed: <seed: drawn at submission>" in drawn.stderr  # the summary
    fixed = cli("run", "--dryrun", "--seed", "7", "utils.echo", check=True)
    assert "TRAINLAUNCH_SEED=7" in fixed.stdout and "seed: 7" in fixed.stderr
    doc = json.loads(cli("run", "--dryrun", "--json", "utils.echo", check=True).stdout)
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


def test_read_only_commands_never_create_the_store(cli: CLI, tmp_path: Path) -> None:
    home = tmp_path / "nonexistent" / "x"
    env = {"TRAINLAUNCH_HOME": str(home)}
    assert cli("list", env=env, check=True).stdout == ""
    assert json.loads(cli("list", "--json", env=env, check=True).stdout) == []
    for cmd in ("status", "logs", "describe", "wait", "stop", "metrics"):
        proc = cli(cmd, "nope-123", env=env)
        assert proc.returncode == 4, (cmd, proc.stderr)
    assert not (tmp_path / "nonexistent").exists()


def test_a_relative_store_is_refused(cli: CLI) -> None:
    proc = cli("list", env={"TRAINLAUNCH_HOME": "rel/home"})
    assert proc.returncode == 2
    assert "TRAINLAUNCH_HOME must be an absolute path" in one_error(proc.stderr)
    assert not (cli.cwd / "rel").exists()


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


def test_a_script_given_as_component_suggests_how_to_run_it(cli: CLI) -> None:
    (cli.cwd / "mytrain.py").write_text("print('hi')\n")
    proc = cli("run", "mytrain.py", "--steps", "3")
    assert proc.returncode == 2
    assert "'mytrain.py' is a script, not a component" in one_error(proc.stderr)
    assert "dist.ddp mytrain.py" in proc.stderr and "utils.python mytrain.py" in proc.stderr


def test_a_local_utils_py_is_named_in_the_hint(cli: CLI) -> None:
    (cli.cwd / "utils.py").write_text("def fn():\n    pass\n")
    proc = cli("run", "utils.fn")
    assert proc.returncode == 2
    assert "utils.sh" not in proc.stderr
    assert "trainlaunch run utils.py:fn" in proc.stderr
    typo = cli("run", "utils.ech")  # a typo of a builtin is still one
    assert "did you mean 'utils.echo'?" in typo.stderr


# --- 7. dist.ddp checks its script on the local backend ------------------------------------------


def test_ddp_script_is_checked_at_submission_on_local(cli: CLI, tmp_path: Path) -> None:
    missing = cli("run", "dist.ddp", "--nproc", "2", "nosuch.py")
    assert missing.returncode == 2
    assert "no file 'nosuch.py'" in one_error(missing.stderr)
    assert str(cli.cwd / "nosuch.py") in missing.stderr
    assert not (cli.home / "apps").exists() or not list((cli.home / "apps").iterdir())
    other = tmp_path / "other"
    other.mkdir()
    (other / "train.py").write_text("")
    cli("run", "--dryrun", "--cfg", f"cwd={other}", "dist.ddp", "train.py", check=True)
    cli("run", "--dryrun", "dist.ddp", str(other / "train.py"), check=True)
    cli("run", "--dryrun", "dist.ddp", "-m", "not.checked.here", check=True)
    nopy = cli("run", "--dryrun", "dist.ddp", "--no-python", "no-such-program-xyz")
    assert nopy.returncode == 2 and "no command 'no-such-program-xyz' on PATH" in nopy.stderr
    assert cli("run", "utils.python", "nosuch.py").returncode == 2
    helped = " ".join(cli("run", "dist.ddp", "--help", check=True).stdout.split())
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


# --- 9. resources in the dryrun summary ----------------------------------------------------------


def test_dryrun_summary_shows_resources(cli: CLI) -> None:
    (cli.cwd / "train.py").write_text("")
    proc = cli("run", "--dryrun", "dist.ddp", "--nproc", "2", "train.py", check=True)
    assert "role train: 1 replica, each cpu 2, gpu 0, memory not set" in proc.stderr
    sh = cli("run", "--dryrun", "utils.sh", "--memMB", "2048", "true", check=True)
    assert "memory 2048 MiB" in sh.stderr
    doc = json.loads(cli("run", "--dryrun", "--json", "dist.ddp", "train.py", check=True).stdout)
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


def test_shell_completion(cli: CLI) -> None:
    assert cli(env={"_TRAINLAUNCH_COMPLETE": "bash_source"}, check=True).stdout.startswith(
        "_trainlaunch_completion()"
    )
    offered = complete(cli, "trainlaunch st")
    assert {"status", "stop"} <= set(offered) and all(c.startswith("st") for c in offered)
    assert complete(cli, "trainlaunch run --dr") == ["--dryrun"]
    assert "utils.echo" in complete(cli, "trainlaunch run --seed 3 ut")
    assert "--streams" in complete(cli, "trainlaunch logs --st")
    assert complete(cli, "trainlaunch status ") == []  # no store yet: nothing, and none made
    assert not cli.home.exists()
    app_id = cli.run("utils.echo").rsplit("/", 1)[1]
    assert complete(cli, "trainlaunch logs ") == [app_id]  # a bare app id is a local handle
    assert complete(cli, f"trainlaunch wait {app_id[:3]}") == [app_id]


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


def test_status_exit_code_is_0_for_a_succeeded_app(cli: CLI) -> None:
    handle = cli.run("utils.echo")
    final = wait_until(lambda: (s := cli.status(handle))["is_terminal"] and s)
    assert final["state"] == "SUCCEEDED" and final["exit_code"] == 0
