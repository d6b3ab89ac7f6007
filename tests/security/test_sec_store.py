"""The app store is private: directories 0700, files 0600, whatever the umask; and a store
another user can write to (or owns) is refused with exit 5 before anything is read or run."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CLI
from tests.faults.fault_helpers import running_replicas, wait_processes


def _modes(root: Path) -> list[str]:
    """Every path under root that a group or other user could read, write or enter."""
    loose = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames, ""]:
            path = Path(dirpath, name) if name else Path(dirpath)
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                continue
            if st.st_mode & 0o077:
                loose.append(f"{oct(stat.S_IMODE(st.st_mode))} {path.relative_to(root.parent)}")
    return sorted(set(loose))


@pytest.mark.parametrize(
    "umask",
    [
        pytest.param(0o022, id="umask022"),
        pytest.param(0o000, id="umask000", marks=pytest.mark.slow),
    ],
)
def test_everything_in_the_store_is_private(reaper: CLI, umask: int) -> None:
    cli = reaper

    def run(*args: str) -> str:
        proc = cli.popen(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, umask=umask)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        return out.strip()

    done = run("run", "utils.sh", "--num-replicas", "2", "echo out; echo err >&2; exit 1")
    cli.wait(done)
    stopped = run("run", "utils.sh", "sleep 300")
    running_replicas(cli, stopped, 1)
    wait_processes(stopped, 1)
    run("stop", stopped)  # creates the lock file and rewrites state.json
    app = cli.home / "apps" / done.rsplit("/", 1)[1]
    expected = [
        "app.json",
        "state.json",
        "supervisor.json",
        "supervisor.log",
        "logs/sh/0/stdout.log",
        "logs/sh/0/stderr.log",
        "logs/sh/0/combined.log",
        "logs/sh/1/stdout.log",
    ]
    for rel in expected:
        assert (app / rel).exists(), rel
    assert _modes(cli.home) == [], "readable or writable by others"


@pytest.mark.parametrize(
    "target,mode",
    [
        ("home", 0o777),
        ("apps", 0o770),
        *[
            pytest.param(t, m, marks=pytest.mark.slow)
            for t in ("home", "apps")
            for m in (0o777, 0o770, 0o1777, 0o722)
            if (t, m) not in (("home", 0o777), ("apps", 0o770))
        ],
    ],
    ids=lambda v: oct(v) if isinstance(v, int) else v,
)
def test_store_writable_by_others_is_refused(reaper: CLI, target: str, mode: int) -> None:
    cli = reaper
    (cli.home / "apps").mkdir(parents=True, mode=0o700)
    (cli.home).chmod(0o700)
    path = cli.home if target == "home" else cli.home / "apps"
    path.chmod(mode)
    for args in (["run", "utils.echo"], ["list"], ["status", "echo-abc"], ["stop", "echo-abc"]):
        proc = cli(*args)
        assert proc.returncode == 5, f"{args}: {proc.returncode} {proc.stderr}"
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
        assert errors == [f"error: refusing to use app store {path}: writable by other users"], (
            proc.stderr
        )
        assert f"hint: run: chmod go-w {path}" in proc.stderr
    assert list((cli.home / "apps").iterdir()) == [], "an app was created in a shared store"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_store_owned_by_another_user_is_refused(reaper: CLI) -> None:
    cli = reaper
    cli.home.mkdir(mode=0o700)
    os.chown(cli.home, 65534, 65534)
    proc = cli("list")
    assert proc.returncode == 5, proc.stderr
    assert "owned by uid 65534, not you" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_store_path_that_is_a_file(reaper: CLI) -> None:
    cli = reaper
    cli.home.write_text("not a directory")
    proc = cli("list")  # reads: never creates (issue 12), but refuses the file all the same
    assert proc.returncode == 5, proc.stderr
    assert proc.stderr.startswith("error: cannot use the app store"), proc.stderr
    assert "not a directory" in proc.stderr
    proc = cli("run", "utils.echo")
    assert proc.returncode == 5, proc.stderr
    assert proc.stderr.startswith("error: cannot create the app store"), proc.stderr
