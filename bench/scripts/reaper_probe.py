"""Wall and CPU time of a launcher process, read from its zombie before it is reaped.

usage: reaper_probe.py detached|foreground ARGV...; prints one JSON object.

This process makes itself a child subreaper (Linux prctl), so the detached supervisor that
`trainlaunch run` leaves behind becomes its child when the CLI exits. It then waits for the
launcher with WNOWAIT: the launcher is a zombie whose /proc/<pid>/stat still holds its own
CPU time (utime+stime) apart from its children's (cutime+cstime), then reaps it.

* detached: ARGV is `trainlaunch run ...`; the launcher is the supervisor named in the app
  store (the wall time runs from the CLI's start to the supervisor's exit).
* foreground: ARGV is the launcher itself (torchx run, torchrun).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
TICK = os.sysconf("SC_CLK_TCK")


def cpu_of_zombie(pid: int) -> tuple[float, float]:
    """(own CPU s, children's CPU s) of an exited, not yet reaped child."""
    data = Path(f"/proc/{pid}/stat").read_bytes()
    fields = data[data.rfind(b")") + 2 :].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / TICK, (cutime + cstime) / TICK


def wait_exit(pid: int) -> None:
    """Block until pid (our child) has exited, without reaping it."""
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def main() -> None:
    """Run the launcher and report its wall and CPU times."""
    mode, argv = sys.argv[1], sys.argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    t0 = time.perf_counter()
    out: dict[str, float] = {}
    if mode == "detached":
        proc = subprocess.run(argv, capture_output=True, text=True)
        out["cli_wall"] = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{argv} exited {proc.returncode}: {proc.stderr[-500:]}")
        app_id = proc.stdout.strip().rsplit("/", 1)[1]
        app_dir = Path(os.environ["TRAINLAUNCH_HOME"]) / "apps" / app_id
        pid = int(json.loads((app_dir / "supervisor.json").read_text())["pid"])
    else:
        pid = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        ).pid
    wait_exit(pid)
    out["wall"] = time.perf_counter() - t0
    out["self_cpu"], out["children_cpu"] = cpu_of_zombie(pid)
    _, status = os.waitpid(pid, 0)
    out["exit_code"] = os.waitstatus_to_exitcode(status)
    while True:  # reap anything else that was re-parented to us
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    print(json.dumps(out))


if __name__ == "__main__":
    main()
