"""Values that must be refused when they are parsed (issue 13: items 2, 3 and 10).

Each command line runs in-process through the one error boundary: one `error:` line that
says what is wrong, the documented exit code, no traceback, nothing started. A dry run of the
largest job a backend accepts is measured in a real subprocess: it stays small and quick.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.fault_helpers import check_clean_exit, cli_env, run_inprocess

NOT_UTF8 = b"[run]\nseed = 1\n# caf\xe9 (latin-1)\n"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A private store and working directory for in-process runs (nothing is started)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "mystrategies.py").write_text("# registers myproj strategies in the ranks\n")
    (work / "x.py").write_text("")  # the local backend checks that a dist.ddp script exists
    with cli_env(tmp_path / "home", work):
        yield tmp_path


def _refused(argv: list[str], code: int, *needles: str) -> str:
    got, out, err = run_inprocess(argv)
    check_clean_exit(argv, got, err, allowed={code})
    error = next(ln for ln in err.splitlines() if ln.startswith("error:"))
    for needle in needles:
        assert needle in error, (argv, err)
    assert out == "", f"{argv}: refused, yet printed {out[:200]!r}"
    return error


DDP = ["run", "--dryrun", "dist.ddp"]
REFUSED = [
    # 2: the world size, bounded before anything is planned per rank
    ([*DDP, "--nproc", "100000", "--nnodes", "100000", "x.py"], "at most 1024 workers per node"),
    ([*DDP, "--nproc", "9" * 20, "x.py"], "at most 1024 workers per node"),
    ([*DDP, "--nnodes", "100001", "x.py"], "at most 100000 nodes"),
    ([*DDP, "--nnodes", "2000", "x.py"], "the local backend runs at most 1024"),
    ([*DDP, "-j", "100000x100000", "x.py"], "at most 1024 workers per node"),
    (["run", "--dryrun", "utils.echo", "--num-replicas", "100001"], "at most 100000"),
    (["run", "--dryrun", "utils.echo", "--num-replicas", "1025"], "runs at most 1024"),
    (["run", "--dryrun", "utils.echo", "--num-replicas", "9" * 30], "at most 100000"),
    # 10: scheduler options, the component's flags, the settings, wait
    (["run", "--dryrun", "--cfg", "grace_period=inf", "utils.echo"], "finite"),
    (["run", "--dryrun", "--cfg", "grace_period=nan", "utils.echo"], "finite"),
    (["run", "--dryrun", "--cfg", "grace_period=1e400", "utils.echo"], "finite"),
    (["run", "--dryrun", "--cfg", "grace_period=-5", "utils.echo"], "must be >= 0"),
    (["run", "--dryrun", "--cfg", "cwd=/nonexistent", "utils.echo"], "no such directory"),
    (["run", "--dryrun", "--cfg", ",,,", "utils.echo"], "empty option"),
    (["run", "--dryrun", "--cfg", "grace_period=1,,cwd=/", "utils.echo"], "empty option"),
    (["run", "--dryrun", "--cfg", "gpu_count=-1", "utils.echo"], "must be >= 0"),
    ([*DDP, "--rdzv-backend", "nope", "x.py"], "unknown backend 'nope'"),
    (["run", "--dryrun", "--export-strategy", "pkg:nonexistent", "utils.echo"], "no module 'pkg'"),
    (["run", "--dryrun", "--export-strategy", "nosuchpkg.sub:x", "utils.echo"], "nosuchpkg"),
    (["wait", "--timeout", "nan", "local://trainlaunch/x-1"], "nan"),
    # issue 23 #25: accepted without a check (a hang watchdog silently off, requeues < 0, ...)
    (["run", "--dryrun", "--cfg", "hang_timeout=-1", "utils.echo"], "must be > 0 (leave"),
    (["run", "--dryrun", "--cfg", "hang_timeout=0", "utils.echo"], "must be > 0 (leave"),
    (["run", "--dryrun", "--hang-timeout", "0", "utils.echo"], "must be > 0 (leave"),
    (["run", "--dryrun", "-s", "slurm", "--hang-timeout", "-1", "utils.echo"], "must be > 0"),
    (["run", "--dryrun", "--cfg", "max_requeues=-5", "utils.echo"], "must be >= 0"),
    ([*DDP, "--rdzv-endpoint", "::::", "x.py"], "HOST[:PORT] (IPv6: [ADDR]:PORT)"),
    ([*DDP, "--rdzv-endpoint", "fe80::1", "x.py"], "HOST[:PORT] (IPv6: [ADDR]:PORT)"),
    ([*DDP, "--rdzv-endpoint", "node0:65536", "x.py"], "HOST[:PORT]"),
    ([*DDP, "--rdzv-endpoint", ":29400", "x.py"], "HOST[:PORT]"),
    (
        ["run", "--dryrun", "-s", "kubernetes", "--cfg", f"termination_grace_period={2**63}"]
        + ["utils.echo", "--image", "python:3.12"],
        "0..9223372036854775807 seconds",
    ),
]


@pytest.mark.parametrize("argv,needle", REFUSED, ids=[" ".join(a[1:])[:60] for a, _ in REFUSED])
def test_refused_at_parse_time(home: Path, argv: list[str], needle: str) -> None:
    _refused(argv, 2, needle)
    assert not (home / "home" / "apps").exists() or not any((home / "home" / "apps").iterdir())


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--dryrun", "--cfg", "grace_period=0,", "utils.echo"],  # one trailing comma
        ["run", "--dryrun", "--cfg", "gpu_count=0,cwd=.", "utils.echo"],
        ["run", "--dryrun", "--export-strategy", "mystrategies:even", "utils.echo"],  # in cwd
        ["run", "--dryrun", "--export-strategy", "json:x", "utils.echo"],  # an installed one
        [*DDP, "--rdzv-backend", "c10d", "--nnodes", "2", "x.py"],
        [*DDP, "--nproc", "1024", "x.py"],
        [*DDP, "--rdzv-endpoint", "[::1]:29400", "x.py"],  # IPv6 in brackets
        ["run", "--dryrun", "--cfg", "hang_timeout=0.5,max_requeues=0", "utils.echo"],
        ["wait", "--timeout", "0", "local://trainlaunch/x-1"],  # not found: 4, the value is fine
    ],
)
def test_valid_values_still_pass(home: Path, argv: list[str]) -> None:
    code, _, err = run_inprocess(argv)
    check_clean_exit(argv, code, err, allowed={0, 4})


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_config_that_is_not_utf8_is_a_config_error_naming_the_file(home: Path) -> None:
    """Issue 13.3: TRAINLAUNCH_CONFIG, a pyproject.toml found upward and the user file."""
    work = home / "work"
    explicit = _write(home / "explicit.toml", NOT_UTF8)
    with cli_env(home / "home", work, {"TRAINLAUNCH_CONFIG": str(explicit)}):
        _refused(["run", "--dryrun", "utils.echo"], 2, str(explicit), "UTF-8")

    upward = _write(home / "proj" / "pyproject.toml", b"[tool.trainlaunch]\n" + NOT_UTF8[6:])
    (home / "proj" / "sub").mkdir()
    with cli_env(home / "home", home / "proj" / "sub"):
        os.environ.pop("TRAINLAUNCH_CONFIG")  # no explicit file: search upward from the cwd
        _refused(["run", "--dryrun", "utils.echo"], 2, str(upward), "UTF-8")

    user = _write(home / "xdg-config" / "trainlaunch" / "config.toml", NOT_UTF8)
    with cli_env(home / "home", work):
        _refused(["run", "--dryrun", "utils.echo"], 2, str(user), "UTF-8")


# A bare interpreter forks and waits for the dry run, then writes the child's peak RSS. Linux
# carries the parent's peak into a forked child across exec, so a child of this (large) test
# process would report at least the test process's own peak; the bare one is ~10 MiB.
_PEAK_OF_CHILD = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _dryrun_cost(tmp_path: Path, *argv: str) -> tuple[int, int, str, float]:
    """(exit code, output lines, stderr, peak RSS in MiB) of a real dry run."""
    env = {
        "PATH": "/usr/bin:/bin",
        "TRAINLAUNCH_HOME": str(tmp_path / "home"),
        "TRAINLAUNCH_CONFIG": "",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    (tmp_path / "x.py").write_text("")  # the local backend checks that the script exists
    peak = tmp_path / "peak-kib"
    with open(tmp_path / "out", "w+") as out, open(tmp_path / "err", "w+") as err:
        code = subprocess.call(
            [sys.executable, "-S", "-c", _PEAK_OF_CHILD, str(peak), sys.executable]
            + ["-m", "trainlaunch", "run", "--dryrun", *argv],
            stdout=out,
            stderr=err,
            env=env,
            cwd=tmp_path,
        )
        out.seek(0)
        err.seek(0)
        return code, out.read().count("\n"), err.read(), int(peak.read_text()) / 1024


@pytest.mark.parametrize(
    "argv,max_lines",
    [
        # the biggest local job: 1024 nodes x 1024 workers; every replica's request is shown,
        # the rank plan only for the first nodes and the last one, 4 ranks of each
        (["dist.ddp", "--nproc", "1024", "--nnodes", "1024", "x.py"], 20_000),
        (["-s", "slurm", "dist.ddp", "--nproc", "1024", "--nnodes", "100000", "x.py"], 200),
    ],
    ids=["local-1Mi-ranks", "slurm-100Mi-ranks"],
)
def test_dry_run_of_the_largest_job_stays_cheap(
    tmp_path: Path, argv: list[str], max_lines: int
) -> None:
    """Issue 13.2: it used to grow to 22 GB; now it summarises instead of enumerating."""
    code, lines, err, peak_mib = _dryrun_cost(tmp_path, *argv)
    assert code == 0, err
    assert lines <= max_lines, f"{lines} lines of dry run"
    assert peak_mib < 400, f"the dry run peaked at {peak_mib:.0f} MiB"
