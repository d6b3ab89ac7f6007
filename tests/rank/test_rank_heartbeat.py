"""trainlaunch.rank.heartbeat(): touches this rank's file, at most once per interval."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from trainlaunch import settings


def run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
        check=True,
    )


def test_heartbeat_touches_the_ranks_file_rate_limited(tmp_path: Path) -> None:
    template = str(tmp_path / "hb" / "rank{rank}")
    code = (
        "import os, time, trainlaunch.rank as r\n"
        "r.heartbeat()\n"
        "p = os.environ['HB_FILE']\n"
        "os.utime(p, (1, 1))\n"  # pretend it is old: a second call within 1 s must not touch it
        "r.heartbeat()\n"
        "print(os.stat(p).st_mtime)\n"
        "time.sleep(1.1)\n"
        "r.heartbeat()\n"
        "print(os.stat(p).st_mtime > 1)\n"
    )
    out = run(
        code,
        {settings.HEARTBEAT_PATH: template, "RANK": "3", "HB_FILE": str(tmp_path / "hb" / "rank3")},
    )
    assert out.stdout.split() == ["1.0", "True"]


def test_heartbeat_without_the_variable_does_nothing(tmp_path: Path) -> None:
    out = run(
        "import trainlaunch.rank as r\nr.heartbeat()\nprint('ok')\n",
        {"TRAINLAUNCH_HEARTBEAT_PATH": ""},
    )
    assert out.stdout == "ok\n" and not list(tmp_path.iterdir())
