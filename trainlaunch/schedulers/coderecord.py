"""The code of record: which commit an app was submitted from, and whether the tree was dirty.

Recorded at submission in the app's run record (``rerun.META_KEY``: ``code``), on every
backend, with or without ``--snapshot``: ``{"git": {"root", "commit", "dirty",
"diff_sha256"}}`` from the submission's directory, ``{"git": None, "why": "not in a git work
tree"}`` outside one, ``{"git": None, "why": "not recorded: ..."}`` when git is missing, fails
or is slow. Outside any folder with a ``.git`` no git runs at all; inside, two git commands
run at once (``rev-parse``, ``diff HEAD``), bounded by :data:`TIMEOUT_S`: a submission never
fails or waits long because of git. The diff covers
tracked files (staged and not: ``git diff HEAD``); untracked files are not part of it
(``git status -uno``'s view). docs/preemption.md ("The code of record") has the measured cost.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

TIMEOUT_S = 0.5  # at most this long at submission (a cold cache on a huge repo), else not recorded
REUSE_S = 5.0  # a sweep's points, submitted together, share one look (per directory)
NOT_GIT = "not in a git work tree"

_seen: dict[str, tuple[float, dict[str, Any]]] = {}


def code_record(cwd: str) -> dict[str, Any]:
    """The code of record for a submission from cwd (never raises)."""
    now = time.monotonic()
    hit = _seen.get(cwd)
    if hit is not None and now - hit[0] < REUSE_S:
        return hit[1]
    rec = _look(cwd)
    _seen[cwd] = (now, rec)
    return rec


def _outside_git(cwd: str) -> bool:
    """True when neither cwd nor a folder above it holds a ``.git`` and ``GIT_DIR`` is unset:
    git would only say "not a git repository", and two processes (~5 ms of CPU) are saved."""
    if "GIT_DIR" in os.environ:
        return False
    path = os.path.abspath(cwd)
    while not os.path.lexists(os.path.join(path, ".git")):
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent
    return False


def _look(cwd: str) -> dict[str, Any]:
    if _outside_git(cwd):
        return {"git": None, "why": NOT_GIT}
    env = {
        **os.environ,
        "GIT_OPTIONAL_LOCKS": "0",  # never take the index lock (a concurrent `git commit`)
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
    }
    git = ["git", "-C", cwd, "-c", "core.fsmonitor=false"]
    try:
        head = subprocess.Popen(
            [*git, "rev-parse", "--show-toplevel", "HEAD"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    except OSError as e:
        return {"git": None, "why": f"not recorded: git: {e.strerror or e}"}
    diff = subprocess.Popen(
        [*git, "diff", "HEAD", "--binary", "--no-color", "--no-ext-diff", "--no-textconv"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + TIMEOUT_S
    try:
        out, err = head.communicate(timeout=TIMEOUT_S)
        diff_out, _ = diff.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for p in (head, diff):
            p.kill()
            p.wait()
        return {"git": None, "why": f"not recorded: git took longer than {TIMEOUT_S:g} s"}
    if head.returncode != 0:
        text = err.decode(errors="replace").strip()
        if "not a git repository" in text:
            return {"git": None, "why": NOT_GIT}
        last = text.splitlines()[-1] if text else f"exit {head.returncode}"
        return {"git": None, "why": f"not recorded: git rev-parse: {last}"}
    lines = out.decode(errors="replace").split()
    if len(lines) != 2 or diff.returncode != 0:
        return {"git": None, "why": f"not recorded: git diff HEAD exited {diff.returncode}"}
    root, commit = lines
    digest = None
    if diff_out:  # a clean tree (and no tree) never pays for hashlib's OpenSSL start (~3 ms)
        import hashlib

        digest = hashlib.sha256(diff_out).hexdigest()
    return {
        "git": {
            "root": root,
            "commit": commit,
            "dirty": digest is not None,
            "diff_sha256": digest,
        }
    }


def describe_line(code: Any) -> str:
    """describe's line: ``git 1a2b3c4d5e6f (dirty: diff sha256 9f8e7d6c5b4a) in /src/proj``."""
    if not isinstance(code, dict):
        return "not recorded (submitted before trainlaunch recorded it)"
    g = code.get("git")
    if not isinstance(g, dict):
        return str(code.get("why") or NOT_GIT)
    state = f"dirty: diff sha256 {str(g.get('diff_sha256'))[:12]}" if g.get("dirty") else "clean"
    return f"git {str(g.get('commit'))[:12]} ({state}) in {g.get('root')}"


__all__ = ["NOT_GIT", "TIMEOUT_S", "code_record", "describe_line"]
