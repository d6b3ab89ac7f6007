"""The CLI's entry function run in the test process, as a new interpreter would run it.

`main_in_process` is what tests/conftest.py's ``inprocess_cli`` fixture calls (the rule for
choosing it over ``cli`` is at the top of conftest.py and in docs/development.md).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def environment(environ: Mapping[str, str], cwd: Path) -> Iterator[None]:
    """os.environ exactly `environ` and the working directory `cwd` (both put back after)."""
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


@functools.cache
def fresh_sys_path() -> tuple[str, ...]:
    """sys.path of a new interpreter after its first entry (no pytest rootdir, no tests/)."""
    out = subprocess.run(
        [sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
    ).stdout
    return tuple(json.loads(out))


def _installed(name: str, module: Any) -> bool:
    """A module a fresh interpreter imports the same way (trainlaunch, stdlib, site-packages)."""
    if name.partition(".")[0] == "trainlaunch":
        return True
    file = getattr(module, "__file__", None)
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return file is None or any(file.startswith(p + os.sep) for p in prefixes)


def _signal_handlers() -> dict[int, Any]:
    handlers = {}
    for sig in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            handlers[sig] = signal.getsignal(sig)
    return handlers


def _std_streams(out: Any, err: Any) -> tuple[io.TextIOWrapper, io.TextIOWrapper]:
    """stdout and stderr as a new interpreter makes them for pipes (encoding, errors, buffering)."""
    errors = getattr(sys.__stdout__, "errors", None) or "strict"  # the locale's choice
    return (
        io.TextIOWrapper(out, encoding="utf-8", errors=errors),
        io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", line_buffering=True),
    )


def _still_running(threads: set[threading.Thread], timeout: float = 10.0) -> list[str]:
    """The threads that do not end within timeout (a call must not leave work behind)."""
    for t in threads:
        t.join(timeout)
    return [t.name for t in threads if t.is_alive()]


def _text(f: Any) -> str:
    """What `subprocess.run(text=True)` makes of the bytes written (universal newlines)."""
    f.seek(0)
    return io.TextIOWrapper(io.BytesIO(f.read()), encoding="utf-8", errors="replace").read()


def main_in_process(
    argv: Sequence[str], input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`trainlaunch ARGV` through `boundary.main` here, in this os.environ and working directory.

    What the call changes in the process is put back afterwards: signal handlers (`run --wait`,
    `logs -f` install them), the umask, sys.path and the modules a file component imported
    (so the next call loads its own file); stdout and stderr are real files, as a pipe would be
    (`logs` copies with sendfile), and stdin holds `input`. Threads the call started must end.
    """
    from trainlaunch.cli import boundary

    ignored = frozenset(
        s for s in (signal.SIGINT, signal.SIGHUP) if signal.getsignal(s) == signal.SIG_IGN
    )
    assert ignored == boundary.IGNORED_AT_START, "signals changed since trainlaunch was imported"
    handlers = _signal_handlers()
    saved_path, saved_modules = list(sys.path), set(sys.modules)
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    umask = os.umask(0o077)
    os.umask(umask)
    threads = set(threading.enumerate())
    path = [os.getcwd(), *fresh_sys_path()]
    code: Any = "none"
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdin = io.TextIOWrapper(io.BytesIO((input or "").encode()), encoding="utf-8")
        streams = _std_streams(out, err)  # held here: a wrapper closes its file when collected
        sys.stdout, sys.stderr = streams
        sys.path[:] = path
        importlib.invalidate_caches()  # a file the test has just written is found
        try:
            boundary.main(list(argv))
        except SystemExit as e:
            code = e.code
        finally:
            left = _still_running(set(threading.enumerate()) - threads)
            for stream in streams:
                stream.flush()
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            sys.path[:] = saved_path
            for name in set(sys.modules) - saved_modules:
                if not _installed(name, sys.modules[name]):
                    del sys.modules[name]
            os.umask(umask)
            for sig, handler in handlers.items():
                if handler is not None and signal.getsignal(sig) is not handler:
                    signal.signal(sig, handler)
        assert not left, f"trainlaunch {list(argv)} left threads running: {left}"
        assert code != "none", f"boundary.main returned for {list(argv)} instead of exiting"
        stdout, stderr = _text(out), _text(err)
    returncode = 0 if code is None else int(code) if isinstance(code, int) else 1
    return subprocess.CompletedProcess(["trainlaunch", *argv], returncode, stdout, stderr)
