"""General-purpose builtin components: echo, sh, python, binary, touch, sleep, exit.

Each is ``trainlaunch run utils.NAME [options] [args]``; ``--help`` shows the options.
"""

from __future__ import annotations

import re
import sys
from pathlib import PurePath
from typing import Literal

from trainlaunch import specs
from trainlaunch.errors import UsageError

RetryPolicyName = Literal["APPLICATION", "REPLICA", "ROLE"]


def echo(msg: str = "hello world", image: str = "", num_replicas: int = 1) -> specs.AppDef:
    """Print a message on every replica (runs echo).

    Args:
        msg: the message to print
        image: container image (schedulers that run containers)
        num_replicas: how many replicas print it
    """
    return _app("echo", "echo", (msg,), image=image, num_replicas=num_replicas)


def sh(
    *args: str,
    image: str = "",
    num_replicas: int = 1,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 0,  # noqa: N803 (the Resource field's spelling)
    env: dict[str, str] | None = None,
    max_retries: int = 0,
    retry_policy: RetryPolicyName = "APPLICATION",
) -> specs.AppDef:
    """Run a shell command on every replica: bash -c "ARGS joined by spaces".

    The arguments are joined with single spaces and handed to bash -c unquoted, so they are
    shell text: utils.sh 'echo $TRAINLAUNCH_REPLICA_ID && hostname' works, and so does
    utils.sh echo hello.

    Args:
        args: the command line (shell text)
        image: container image (schedulers that run containers)
        num_replicas: how many replicas run it
        cpu: CPUs per replica
        gpu: GPUs per replica
        memMB: memory per replica in MiB (0: not set, the cluster's default)
        env: extra environment variables
        max_retries: how often the scheduler restarts a failure
        retry_policy: what a failure restarts: the app, the replica or the role
    """
    if not args:
        raise UsageError("utils.sh needs a command, e.g. trainlaunch run utils.sh echo hi")
    return _app(
        "sh",
        "bash",
        ("-c", " ".join(args)),
        image=image,
        num_replicas=num_replicas,
        env=env,
        max_retries=max_retries,
        retry_policy=retry_policy,
        resource=specs.Resource(cpu=cpu, gpu=gpu, memMB=memMB),
    )


def python(
    *args: str,
    m: str | None = None,
    c: str | None = None,
    script: str | None = None,
    image: str = "",
    name: str | None = None,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 0,  # noqa: N803
    num_replicas: int = 1,
    env: dict[str, str] | None = None,
    max_retries: int = 0,
) -> specs.AppDef:
    """Run a Python module, code string or script on every replica.

    Without -m, -c or --script the first positional argument is the script:
    utils.python train.py --lr 0.1. Without an image the launcher's own interpreter
    (sys.executable) runs it; with an image, python from the image's PATH.
    PYTHONUNBUFFERED=1 is set so output reaches the logs as it is printed.

    Args:
        args: arguments for the program (after the script when no -m/-c/--script is given)
        m: run this module, like python -m
        c: run this code string, like python -c
        script: run this script file
        image: container image (schedulers that run containers)
        name: app and role name (default: from the module or script)
        cpu: CPUs per replica
        gpu: GPUs per replica
        memMB: memory per replica in MiB (0: not set, the cluster's default)
        num_replicas: how many replicas run it
        env: extra environment variables
        max_retries: how often the scheduler restarts a failure
    """
    chosen = [opt for opt, v in (("-m", m), ("-c", c), ("--script", script)) if v is not None]
    if len(chosen) > 1:
        raise UsageError(
            f"utils.python: give only one of -m, -c, --script (got {', '.join(chosen)})"
        )
    rest = tuple(args)
    program: tuple[str, ...]
    if m is not None:
        program, default = ("-m", m), m.rsplit(".", 1)[-1]
    elif c is not None:
        program, default = ("-c", c), "python"
    elif script is not None or rest:
        if script is None:
            script, rest = rest[0], rest[1:]
        program, default = (script,), PurePath(script).stem
    else:
        raise UsageError(
            "utils.python needs a script, -m MODULE or -c CODE",
            hint="e.g. trainlaunch run utils.python train.py --lr 0.1",
        )
    entrypoint = "python" if image else sys.executable
    full_env = {"PYTHONUNBUFFERED": "1", **(env or {})}
    app = _app(
        name or safe_name(default, "python"),
        entrypoint,
        program + rest,
        image=image,
        num_replicas=num_replicas,
        env=full_env,
        max_retries=max_retries,
        resource=specs.Resource(cpu=cpu, gpu=gpu, memMB=memMB),
    )
    if script is None:
        return app
    return app.map_roles(lambda r: r.replace(metadata={specs.PROGRAM: {"path": script}}))


def binary(
    *args: str,
    entrypoint: str,
    name: str | None = None,
    image: str = "",
    num_replicas: int = 1,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 0,  # noqa: N803
    env: dict[str, str] | None = None,
    max_retries: int = 0,
) -> specs.AppDef:
    """Run an executable with arguments on every replica (no shell).

    Args:
        args: arguments for the executable
        entrypoint: the executable (a path, or a name looked up on PATH)
        name: app and role name (default: the executable's file name)
        image: container image (schedulers that run containers)
        num_replicas: how many replicas run it
        cpu: CPUs per replica
        gpu: GPUs per replica
        memMB: memory per replica in MiB (0: not set, the cluster's default)
        env: extra environment variables
        max_retries: how often the scheduler restarts a failure
    """
    default = PurePath(entrypoint).name if entrypoint else "binary"
    return _app(
        name or safe_name(default, "binary"),
        entrypoint,
        args,
        image=image,
        num_replicas=num_replicas,
        env=env,
        max_retries=max_retries,
        resource=specs.Resource(cpu=cpu, gpu=gpu, memMB=memMB),
    )


def touch(file: str, image: str = "") -> specs.AppDef:
    """Create a file, or update its modification time (runs touch).

    Args:
        file: the file to touch
        image: container image (schedulers that run containers)
    """
    return _app("touch", "touch", (file,), image=image)


def sleep(seconds: float = 60, num_replicas: int = 1, image: str = "") -> specs.AppDef:
    """Sleep on every replica; handy for status, stop and list demos.

    Args:
        seconds: how long to sleep
        num_replicas: how many replicas sleep
        image: container image (schedulers that run containers)
    """
    if not seconds >= 0:  # also rejects NaN
        raise UsageError(f"utils.sleep: seconds must be >= 0, got {seconds}")
    text = f"{seconds:f}".rstrip("0").rstrip(".")  # '60', '0.5': every `sleep` parses these
    return _app("sleep", "sleep", (text or "0",), image=image, num_replicas=num_replicas)


def exit(code: int = 0, num_replicas: int = 1, image: str = "") -> specs.AppDef:  # noqa: A001
    """Exit with a given code on every replica; handy for testing failure handling.

    Args:
        code: the exit code, 0-255
        num_replicas: how many replicas exit with it
        image: container image (schedulers that run containers)
    """
    if not 0 <= code <= 255:
        raise UsageError(f"utils.exit: code must be in 0..255, got {code}")
    return _app("exit", "sh", ("-c", f"exit {code}"), image=image, num_replicas=num_replicas)


def _app(
    name: str,
    entrypoint: str,
    args: tuple[str, ...],
    *,
    image: str = "",
    num_replicas: int = 1,
    env: dict[str, str] | None = None,
    max_retries: int = 0,
    retry_policy: str = "APPLICATION",
    resource: specs.Resource | None = None,
) -> specs.AppDef:
    """One app with one role of the same name."""
    role = specs.Role(
        name=name,
        entrypoint=entrypoint,
        args=tuple(args),
        image=image,
        env=env or {},
        num_replicas=num_replicas,
        max_retries=max_retries,
        retry_policy=specs.RetryPolicy(retry_policy),
        resource=resource or specs.Resource(),
    )
    return specs.AppDef(name=name, roles=(role,))


def safe_name(text: str, fallback: str) -> str:
    """A valid app/role name (specs.check_name) made from free text such as a script name."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")[:63].rstrip("-_.")
    return cleaned or fallback
