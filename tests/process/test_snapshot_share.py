"""Code snapshots are shared by content and bounded in all (issue 23 #23).

A 20-point sweep of a 10 MiB project copied it 20 times (191 MiB). Now each file is kept
once in the store (``snapshots/objects``, read-only, by SHA-256) and every point's snapshot
is a tree of hard links to it; the store's snapshot files are bounded (``snapshot_store_mib``)
with a clear error, and files no snapshot links any more are removed before that is checked.
Real sweeps and runs, disk use counted by the filesystem (allocated blocks, unique inodes).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from tests.conftest import CLI

MIB = 1 << 20


def _project(cwd: Path, seed: bytes = b"a") -> str:
    """A 10 MiB project (one data file and a script); the data file's SHA-256."""
    data = hashlib.sha256(seed).digest() * (10 * MIB // 32)
    (cwd / "data.bin").write_bytes(data)
    (cwd / "show.sh").write_text("#!/bin/sh\necho point $1 $(wc -c < data.bin)\n")
    (cwd / "show.sh").chmod(0o755)
    return hashlib.sha256(data).hexdigest()


def _disk_use(root: Path) -> int:
    """Bytes the filesystem allocated under root, each file once however many links it has."""
    seen, total = set(), 0
    for top, _dirs, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(top, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def test_a_sweeps_points_share_one_snapshot(cli: CLI) -> None:
    digest = _project(cli.cwd)
    values = ",".join(str(i) for i in range(20))
    before = _disk_use(cli.home) if cli.home.exists() else 0
    sweep = cli(
        "sweep",
        "--snapshot",
        "--max-parallel",
        "4",
        "--param",
        f"x={values}",
        "utils.sh",
        "./show.sh {x}",
        check=True,
    ).stdout.strip()
    cli("wait", sweep, timeout=300, check=True)
    doc = json.loads(cli("list", "--json", "--sweep", sweep.rsplit(":", 1)[1], check=True).stdout)
    handles = [p["handle"] for p in doc["points"]]
    assert len(handles) == 20
    added = _disk_use(cli.home) - before
    assert added < 15 * MIB, f"20 points added {added / MIB:.1f} MiB (one copy is 10 MiB)"
    inodes = set()
    for handle in handles:
        snap = cli.home / "apps" / handle.rsplit("/", 1)[1] / "snapshot"
        data = snap / "data.bin"
        assert hashlib.sha256(data.read_bytes()).hexdigest() == digest
        assert os.access(snap / "show.sh", os.X_OK)
        inodes.add(os.stat(data).st_ino)
        out = cli("logs", handle, check=True).stdout
        assert f"{10 * MIB // 32 * 32}" in out, out  # each point ran its snapshot
    assert len(inodes) == 1, "the points do not share the snapshot's file"
    print(f"20 points: {added / MIB:.1f} MiB added to the store")


def test_the_stores_snapshots_are_bounded_with_a_clear_error(cli: CLI) -> None:
    _project(cli.cwd, b"first")
    opts = ["--snapshot", "--cfg", "snapshot_store_mib=15"]
    first = cli("run", *opts, "utils.sh", "./show.sh 1", check=True).stdout.strip()
    cli.wait(first)
    again = cli("run", *opts, "utils.sh", "./show.sh 2", check=True).stdout.strip()  # shared
    cli.wait(again)

    _project(cli.cwd, b"second")  # 10 MiB more: 20 MiB would pass 15
    apps = sorted(p.name for p in (cli.home / "apps").iterdir())
    proc = cli("run", *opts, "utils.sh", "./show.sh 3")
    assert proc.returncode == 5, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "over their limit of 15.0 MiB" in errors[0], proc.stderr
    assert "data.bin alone is 10.0 MiB" in errors[0], proc.stderr
    assert "hint:" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in (cli.home / "apps").iterdir()) == apps, "app dir left behind"

    for handle in (first, again):  # deleted apps free their snapshot's files
        shutil.rmtree(cli.home / "apps" / handle.rsplit("/", 1)[1])
    third = cli("run", *opts, "utils.sh", "./show.sh 3", check=True).stdout.strip()
    assert cli.wait(third)["state"] == "SUCCEEDED"
    assert _disk_use(cli.home / "snapshots") < 11 * MIB
