#!/usr/bin/env python3
"""Profile one trainlaunch CLI command: ``python bench/profile.py [--cpu] [--store N] -- ARGS``.

By default the command runs under pyinstrument (wall-clock sampling; installed on first use
with ``pip install --target`` into ``<bench cache>/tools``, outside the repository). With
``--cpu`` it runs under cProfile with a CPU-time clock instead, which stays truthful when other
work shares the machine. ``--store N`` first fills a scratch TRAINLAUNCH_HOME with N finished
apps (as benchmark 4 does) and substitutes ``{handle}`` in ARGS with one of them.

Examples::

    python bench/profile.py --store 1000 -- list
    python bench/profile.py --cpu --store 1 -- status --json {handle}
    python bench/profile.py --cpu -- run utils.echo --msg hi
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.peers import cache_dir, ensure_ours_venv  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

CPU_DRIVER = """
import cProfile, pstats, runpy, sys, time
top = int(sys.argv[1])
sys.argv = ["trainlaunch", *sys.argv[2:]]
prof = cProfile.Profile(time.process_time)
prof.enable()
try:
    runpy.run_module("trainlaunch", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
prof.disable()
stats = pstats.Stats(prof, stream=sys.stderr)
stats.sort_stats("cumulative").print_stats(top)
stats.sort_stats("tottime").print_stats(top // 2)
"""


def tools_dir() -> Path:
    """pyinstrument, installed once into the bench cache."""
    tools = cache_dir() / "tools"
    if not (tools / "pyinstrument").exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--target", str(tools), "pyinstrument"],
            check=True,
        )
    return tools


def make_store(count: int, python: Path) -> tuple[Path, str]:
    """A scratch store with count finished apps; (home, one handle)."""
    from bench.context import Context
    from bench.peers import no_peers
    from bench.store_scale import clone_apps

    scratch = Path(tempfile.mkdtemp(prefix="trainlaunch-profile-"))
    ctx = Context(mode="quick", scratch=scratch, peers=no_peers("profile"), python=python)
    handle = ctx.finished_app()
    clone_apps(ctx.app_dir(handle), ctx.home / "apps", count - 1)
    return ctx.home, handle


def main() -> int:
    """Run the command under the chosen profiler; the report goes to stderr."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--cpu", action="store_true", help="cProfile with a CPU-time clock")
    p.add_argument("--store", type=int, default=0, metavar="N", help="N finished apps first")
    p.add_argument(
        "--here",
        action="store_true",
        help="profile this interpreter's trainlaunch, not the bench venv's",
    )
    p.add_argument("args", nargs=argparse.REMAINDER, help="-- trainlaunch arguments")
    ns = p.parse_args()
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    env = dict(os.environ)
    python = Path(sys.executable)
    if not ns.here:
        root, why = ensure_ours_venv(cache_dir(), REPO, install=True)
        if root is None:
            raise SystemExit(why)
        python = root / "bin" / "python"
    if ns.store:
        home, handle = make_store(ns.store, python)
        env["TRAINLAUNCH_HOME"] = str(home)
        args = [a.replace("{handle}", handle) for a in args]
        sys.stderr.write(f"store: {home} ({ns.store} apps), handle {handle}\n")
    if ns.cpu:
        cmd = [str(python), "-c", CPU_DRIVER, "35", *args]
    else:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tools_dir()), env.get("PYTHONPATH")]))
        cmd = [
            str(python),
            "-m",
            "pyinstrument",
            "-r",
            "text",
            "--outfile",
            "/dev/stderr",
            "-m",
            "trainlaunch",
            *args,
        ]
    return subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode


if __name__ == "__main__":
    sys.exit(main())
