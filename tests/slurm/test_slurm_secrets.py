"""Secrets, shared job dirs and long arguments on the real cluster (issue 23, items 2, 3, 21).

2: an ``--env`` secret (by name, and by value: a URL with a password) never appears in any
   process's command line while the job runs (``ps``), nor in Slurm's accounting afterwards
   (``sacct -a -o SubmitLine``): the replica script reaches its step as a 0600 file.
3: a job dir another user planted (the dir itself, a symlink to it, a parent of it, a fixed
   ``job_dir``) is refused with one line; the planted symlinks receive nothing and the file a
   planted ``batch.log`` points to is untouched. The second user is uid 65534 (``runuser``).
21: a 100 KB argument reaches the rank byte for byte (one over the kernel's limit for a single
   argument is refused at submission: tests/unit/test_slurm_render.py).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CLI, wait_until
from tests.slurm.conftest import run_app, wait_for
from trainlaunch import settings
from trainlaunch.schedulers.slurm.backend import SlurmScheduler
from trainlaunch.specs import AppDef, AppState, Role

pytestmark = pytest.mark.slurm
OTHER = "nobody"


def _secrets() -> dict[str, str]:
    env = {
        "HF_TOKEN": "tok-" + os.urandom(12).hex(),  # secret by its name
        "DATABASE_URL": f"postgres://app:pw{os.urandom(12).hex()}@db.example/x",  # by value
    }
    assert all(settings.is_secret(k, v) for k, v in env.items())
    return env


def _needles(env: dict[str, str]) -> list[str]:
    """What must never show: each value, and the URL's password on its own."""
    return [*env.values(), env["DATABASE_URL"].split(":")[2].split("@")[0]]


def test_env_secrets_never_in_ps_or_sacct_submit_line(
    slurm: SlurmScheduler, two_nodes: None, tmp_path: Path
) -> None:
    env = _secrets()
    go = tmp_path / "go"
    program = (
        'printf %s "$HF_TOKEN|$DATABASE_URL" | sha256sum >"$TRAINLAUNCH_REPLICA_LOG_DIR/digest"; '
        'touch "$TRAINLAUNCH_REPLICA_LOG_DIR/ready"; '
        'for i in $(seq 1200); do [ -e "$1" ] && exit 0; sleep 0.1; done; exit 3'
    )
    role = Role("sec", "bash", ("-c", program, "sec", str(go)), num_replicas=2, env=env)
    job_id = run_app(slurm, AppDef("sec", [role]), {"snapshot": "off"})
    job_dir = Path(slurm.describe(job_id).metadata["job_dir"])
    wait_until(
        lambda: all((job_dir / "sec" / str(k) / "ready").exists() for k in (0, 1)),
        timeout=120,
        interval=0.2,
        what="both replicas to run",
    )
    ps = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout
    assert "sec" in ps and str(go) in ps  # the job's own processes are in the table
    go.touch()
    st = wait_for(slurm, job_id)
    assert st.state == AppState.SUCCEEDED, st
    want = hashlib.sha256(f"{env['HF_TOKEN']}|{env['DATABASE_URL']}".encode()).hexdigest()
    for k in (0, 1):  # the ranks did get the secrets
        assert (job_dir / "sec" / str(k) / "digest").read_text().split()[0] == want

    def submit_lines() -> str:
        out = subprocess.run(
            ["sacct", "-a", "-n", "-P", "-j", job_id, "-o", "JobID,SubmitLine%2000"],
            capture_output=True,
            text=True,
        ).stdout
        return out if f"{job_id}.0|" in out else ""

    sacct = wait_until(submit_lines, timeout=60, interval=0.5, what="sacct's step rows")
    assert "srun" in sacct, sacct  # the step's own line (a held job's row has none)
    for needle in _needles(env):
        assert needle not in ps, f"a secret is in a command line (ps):\n{ps}"
        assert needle not in sacct, f"a secret is in sacct's SubmitLine:\n{sacct}"
    for f in job_dir.rglob("*"):  # the files that hold it: 0600 in the 0700 job dir
        if f.is_file() and any(n.encode() in f.read_bytes() for n in _needles(env)):
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    assert stat.S_IMODE(job_dir.stat().st_mode) == 0o700


# --- item 3: job dirs another user planted -------------------------------------------------------


def _as_other(*argv: str) -> None:
    subprocess.run(["runuser", "-u", OTHER, "--", *argv], check=True, capture_output=True)


@pytest.fixture
def shared(slurm_nodes: int) -> Iterator[Path]:
    """A /tmp-like shared dir (root's, 1777) that the other user can plant things in."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("a second local user needs root and runuser")
    path = Path(tempfile.mkdtemp(prefix="tl-shared-", dir="/tmp"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _next_job_ids(n: int) -> list[int]:
    """The ids the next jobs get (Slurm counts up): probe with one held job, cancelled."""
    out = subprocess.run(
        ["sbatch", "--parsable", "--hold", "-J", "tl-probe", "--wrap", "true"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run(["scancel", out], check=True)
    return [int(out) + i for i in range(1, n + 1)]


def _plant(d: Path, loot: Path, victim: Path) -> None:
    """As the other user: d with the symlinks a job dir would be written through."""
    _as_other("mkdir", "-m", "0777", "-p", str(d))
    _as_other("ln", "-s", str(loot / "sbatch.sh"), str(d / "sbatch.sh"))
    _as_other("ln", "-s", str(victim), str(d / "batch.log"))
    _as_other("ln", "-s", str(loot), str(d / "sh"))  # the role's replica dirs
    _as_other("ln", "-s", str(loot / "attempts"), str(d / "attempts"))


@pytest.mark.parametrize(
    "case", ["dir", "symlink", "foreign parent", "symlinked parent", "fixed job_dir"]
)
def test_a_job_dir_another_user_planted_is_refused(
    cli: CLI, shared: Path, tmp_path: Path, case: str
) -> None:
    loot = shared / "loot"
    _as_other("mkdir", "-m", "0777", str(loot))
    victim = tmp_path / "victim.txt"  # root's own file, which a batch.log link would grow
    victim.write_text("precious\n")
    before = victim.stat()
    job_dir = f"{shared}/${{app_id}}"
    if case in ("dir", "symlink"):
        for n in _next_job_ids(8):
            if case == "dir":
                _plant(shared / str(n), loot, victim)
            else:
                _plant(shared / f"theirs-{n}", loot, victim)
                _as_other("ln", "-s", str(shared / f"theirs-{n}"), str(shared / str(n)))
    elif case == "foreign parent":
        _as_other("mkdir", "-m", "0777", str(shared / "theirs"))
        job_dir = f"{shared}/theirs/${{app_id}}"
    elif case == "symlinked parent":
        _as_other("mkdir", "-m", "0777", str(shared / "theirs"))
        _as_other("ln", "-s", str(shared / "theirs"), str(shared / "link"))
        job_dir = f"{shared}/link/${{app_id}}"
    else:
        _plant(shared / "fixed", loot, victim)
        job_dir = f"{shared}/fixed"
    secret = "tok-" + os.urandom(12).hex()
    proc = cli(
        "run",
        "-s",
        "slurm",
        "--no-snapshot",
        "--cfg",
        f"job_dir={job_dir}",
        "utils.sh",
        "--env",
        f"HF_TOKEN={secret}",
        "--",
        "echo $HF_TOKEN",
    )
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 5 and len(errors) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == "", proc
    assert "refusing job dir" in errors[0], errors
    # nothing reached the planted links, and no job of ours runs or waits
    assert victim.read_text() == "precious\n" and victim.stat().st_mtime == before.st_mtime
    assert list(loot.iterdir()) == []
    queued = subprocess.run(
        ["squeue", "-h", "-n", "sh", "-t", "PD,R,CG", "-o", "%i %T"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert queued == "", queued


def test_a_fresh_shared_job_dir_is_created_private(
    cli: CLI, shared: Path, slurm_nodes: int
) -> None:
    from tests.slurm.conftest import run_cli, wait_cli

    handle = run_cli(
        cli, "--no-snapshot", "--cfg", f"job_dir={shared}/${{app_id}}", "utils.sh", "echo", "hi"
    )
    doc = wait_cli(cli, handle)
    assert doc["state"] == "SUCCEEDED", doc
    job_dir = shared / handle.rsplit("/", 1)[1]
    st = job_dir.lstat()
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
    assert stat.S_IMODE(st.st_mode) == 0o700
    assert stat.S_IMODE((job_dir / "sbatch.sh").stat().st_mode) == 0o600
    assert (job_dir / "sh" / "0" / "stdout.log").read_text() == "hi\n"


# --- item 21: long arguments ---------------------------------------------------------------------

ALPHABET = "ab c'\"$`\\\n\t;|&*?~#!%{}()<>=-日本☃é"


def test_a_100kb_argument_reaches_the_rank_byte_for_byte(slurm: SlurmScheduler) -> None:
    rng = random.Random(23)
    arg = "".join(rng.choice(ALPHABET) for _ in range(100_000))
    write = (
        "import os, sys; "
        "open(os.environ['TRAINLAUNCH_REPLICA_LOG_DIR'] + '/arg', 'wb').write(os.fsencode(sys.argv[1]))"
    )
    role = Role("long", "python3", ("-c", write, arg))
    job_id = run_app(slurm, AppDef("long", [role]), {"snapshot": "off"})
    st = wait_for(slurm, job_id)
    job_dir = Path(slurm.describe(job_id).metadata["job_dir"])
    assert st.state == AppState.SUCCEEDED, (st, (job_dir / "batch.log").read_text()[-2000:])
    assert (job_dir / "long" / "0" / "arg").read_bytes() == arg.encode()
