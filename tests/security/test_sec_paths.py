"""No handle, app id or logs target can address a path outside the app store.

Bait records sit just outside the store (a valid app.json next to apps/, and one in an
unrelated directory). Every hostile spelling must be a usage error (2) or "not found" (4),
never read the bait, and never create anything (stop's lock file) outside the store.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import CLI
from tests.faults.fault_helpers import check_clean_exit, cli_env, run_inprocess

BAIT = "BAIT-7f3a"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[CLI, str, Path]:
    root = tmp_path_factory.mktemp("paths")
    (root / "work").mkdir()
    cli = CLI(root / "home", root / "work")
    handle = cli.run("utils.echo", "--msg", "the real app")
    assert cli.wait(handle)["state"] == "SUCCEEDED"
    app_id = handle.rsplit("/", 1)[1]
    real = cli.home / "apps" / app_id
    # bait records: next to apps/ (store/evil), far outside, and in every directory that
    # `.`, `..` or `../..` would land on if an id were used as a path unchecked
    outside = root / "outside"
    for bait in (
        cli.home / "evil",
        outside / "evil",
        real / "0",
        cli.home / "apps" / "0",
        cli.home / "apps",
        cli.home,
        root,
    ):
        shutil.copytree(real, bait, dirs_exist_ok=True)
        request = json.loads((bait / "app.json").read_text())
        request["app"]["name"] = BAIT
        (bait / "app.json").write_text(json.dumps(request))
        (bait / "stdout.log").write_text(BAIT + "\n")
        for log in bait.glob("logs/*/*/*.log"):
            log.write_text(BAIT + "\n")
    return cli, app_id, outside


def hostile_handles(cli: CLI, outside: Path) -> list[str]:
    home = str(cli.home)
    return [
        "../evil",
        "../../outside/evil",
        "local://trainlaunch/../evil",
        "local://../evil",
        "local://trainlaunch/..",
        "local://trainlaunch/.",
        "..",
        ".",
        "...",
        "local://trainlaunch/..%2Fevil",
        "%2e%2e%2fevil",
        "%2E%2E/evil",
        "..%2f..%2foutside",
        f"{outside}/evil",
        f"local://trainlaunch/{outside}/evil",
        f"local://trainlaunch/{home}",
        f"local://{home}/evil",
        "local:///evil",
        "local:////etc/passwd",
        "file:///etc/passwd",
        "\u2025/evil",
        "\uff0e\uff0e/evil",
        "\u2024\u2024/evil",
        "local://trainlaunch/\uff0e\uff0e",
        "..\\evil",
        "evil/../../evil",
        "local://trainlaunch/evil/..",
        "~/evil",
        "$HOME/evil",
        " ../evil",
        "../evil ",
        "local://trainlaunch/a\nb",
        "evil\n",
        "\tevil",
        "local://trainlaunch/" + "a" * 300,
        "-evil",
        "--",
        "local://trainlaunch/.hidden",
    ]


@pytest.mark.parametrize("command", ["status", "logs", "stop", "describe", "wait"])
def test_hostile_handles_never_leave_the_store(
    store: tuple[CLI, str, Path], tmp_path: Path, command: str
) -> None:
    cli, _, outside = store
    before = sorted(str(p) for p in cli.home.parent.rglob("*"))
    with cli_env(cli.home, cli.cwd):
        for handle in [*hostile_handles(cli, outside), "local://trainlaunch/a\0b", "evil\0"]:
            argv = [command, "--", handle] if handle.startswith("-") else [command, handle]
            code, out, err = run_inprocess(argv)
            check_clean_exit(argv, code, err, allowed={2, 4})
            assert BAIT not in out + err, f"{argv!r} reached a bait record"
    after = sorted(str(p) for p in cli.home.parent.rglob("*"))
    assert after == before, "a command created files (e.g. a lock) outside the app's directory"


@pytest.mark.parametrize(
    "suffix",
    [
        "../0",
        "..%2F../0",
        "../../evil/0",
        "/0",
        "./0",
        "\uff0e\uff0e/0",
        "echo/../0",
        "echo/0/../..",
        "echo/-1",
        "echo/0,../1",
        "echo/99",
    ],
)
def test_logs_role_and_replica_cannot_traverse(store: tuple[CLI, str, Path], suffix: str) -> None:
    cli, app_id, _ = store
    with cli_env(cli.home, cli.cwd):
        argv = ["logs", f"{app_id}/{suffix}"]
        code, out, err = run_inprocess(argv)
        check_clean_exit(argv, code, err, allowed={2, 4})
        assert BAIT not in out + err


def test_a_few_hostile_handles_through_the_real_cli(store: tuple[CLI, str, Path]) -> None:
    cli, app_id, outside = store
    for handle in [
        "../evil",
        "local://trainlaunch/..%2Fevil",
        f"{outside}/evil",
        "\uff0e\uff0e/evil",
        f"{app_id}/../0",
    ]:
        for command in ("status", "logs"):
            proc = cli(command, handle)
            assert proc.returncode in (2, 4), proc.stderr
            assert BAIT not in proc.stdout + proc.stderr
            assert "Traceback" not in proc.stderr
    real = cli("logs", app_id, check=True)  # the real app is still reachable
    assert "the real app" in real.stdout and BAIT not in real.stdout


@pytest.mark.parametrize(
    "link",
    ["logs", "logs/sh", "logs/sh/0", "logs/sh/0/stdout.log", "logs/sh/0/combined.log"],
)
def test_logs_never_follow_a_symlink_out_of_the_store(reaper: CLI, link: str) -> None:
    """Issue 13.9: a logs directory (or file) replaced by a symlink printed nothing and exited
    0, or followed the link; now one error line and exit 5, and no byte of the target."""
    cli = reaper
    handle = cli.run("utils.sh", "echo the real log")
    assert cli.wait(handle)["state"] == "SUCCEEDED"
    bait = cli.home.parent / "bait"
    (bait / "sh" / "0").mkdir(parents=True)
    for name in ("stdout.log", "sh/0/stdout.log", "sh/stdout.log"):
        (bait / name).write_text("BAIT: outside the store\n")
    (bait / "0").mkdir()
    (bait / "0" / "stdout.log").write_text("BAIT: outside the store\n")
    victim = cli.home / "apps" / handle.rsplit("/", 1)[1] / link
    target = {
        "logs": bait,
        "logs/sh": bait,
        "logs/sh/0": bait / "sh" / "0",
        "logs/sh/0/stdout.log": bait / "stdout.log",
        "logs/sh/0/combined.log": bait / "stdout.log",
    }[link]
    # `logs` reads combined.log (both streams in order); stdout.log is read for --stream stdout
    pick = ["--stream", "stdout"] if link.endswith("stdout.log") else []
    if victim.is_dir():
        shutil.rmtree(victim)
    else:
        victim.unlink()
    victim.symlink_to(target)
    for args in (["logs", handle], ["logs", "-f", handle], ["logs", "--json", handle]):
        proc = cli(*args[:-1], *pick, handle, timeout=30)
        assert proc.returncode == 5, (args, proc.returncode, proc.stderr)
        assert "BAIT" not in proc.stdout, args
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and "symlink" in errors[0], proc.stderr
