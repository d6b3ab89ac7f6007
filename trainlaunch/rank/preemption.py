"""React to a preemption or a time limit inside a rank: save, then ask to be requeued.

Every backend warns the ranks before it takes the machine away: Slurm sends ``SIGUSR1``
(``--cfg signal=USR1@90``) before the time limit and ``SIGTERM`` on preemption or
``scontrol requeue``; Kubernetes sends ``SIGTERM`` and waits ``terminationGracePeriodSeconds``;
``trainlaunch stop --requeue`` sends ``SIGTERM`` locally. The training loop checks
:func:`requested` once per step, saves its state, and calls :func:`requeue`::

    from trainlaunch.rank import preemption

    start = load_checkpoint() if preemption.restart_count() else 0
    for step in range(start, steps):
        train_step(step)
        if preemption.requested():      # every rank agrees (one tiny all-reduce)
            save_checkpoint(step + 1)
            preemption.requeue()        # exit 75: the backend runs the app again

Nothing is installed until the first call of :func:`install`, :func:`requested` or
:func:`on_request`, so a script that never asks keeps the default signal behaviour; call
:func:`install` first thing, so that an early warning is not missed. Once installed, ``SIGTERM``
no longer ends the rank: the backend's SIGKILL after the grace period does (a warning often
arrives twice: from the scheduler and forwarded by the node agent).
docs/preemption.md has the whole story.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import NoReturn

import trainlaunch.settings as settings

WARNING_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM)

_state: dict[str, object] = {"installed": False, "signal": None}
_callbacks: list[Callable[[signal.Signals], None]] = []


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    if _state["signal"] is not None:
        return  # a warning often comes twice (scheduler + node agent): react once
    sig = signal.Signals(signum)
    _state["signal"] = sig
    for cb in list(_callbacks):
        cb(sig)


def install(signals: tuple[signal.Signals, ...] = WARNING_SIGNALS) -> None:
    """Catch the warning signals (idempotent); called by requested() and on_request()."""
    if _state["installed"]:
        return
    for sig in signals:
        signal.signal(sig, _on_signal)
    _state["installed"] = True


def on_request(callback: Callable[[signal.Signals], None]) -> None:
    """Call callback(signal) once, when the first warning arrives (keep it short)."""
    install()
    _callbacks.append(callback)


def received() -> signal.Signals | None:
    """The first warning signal this rank received (None: none yet)."""
    install()
    sig = _state["signal"]
    return sig if isinstance(sig, signal.Signals) else None


def requested(sync: bool = True) -> bool:
    """True once a warning arrived; with sync, True on every rank when any rank got one.

    sync all-reduces the flag when torch.distributed is initialized, so every rank must
    call it at the same points of the loop (once per step, say).
    """
    install()
    flag = _state["signal"] is not None
    dist = sys.modules.get("torch.distributed")
    if sync and dist is not None and dist.is_available() and dist.is_initialized():
        import torch

        device = "cpu"
        if dist.get_backend() == "nccl":
            device = f"cuda:{torch.cuda.current_device()}"
        t = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        flag = bool(t.item())
    return flag


def restart_count() -> int:
    """Which attempt this is: 0 on the first run, then 1, 2, ... after requeues and retries."""
    raw = os.environ.get(settings.RESTART_COUNT, "").strip()
    if raw.isdigit():
        return int(raw)
    # a Kubernetes pod without the node agent: the Job controller's counts for its index
    counts = (
        os.environ.get(n, "").strip() for n in (settings.INDEX_FAILURES, settings.INDEX_REQUEUES)
    )
    return sum(int(c) for c in counts if c.isdigit())


def requeue() -> NoReturn:
    """Exit with the requeue code (75): the backend runs the app again (max_requeues)."""
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(settings.REQUEUE_EXIT_CODE)


__all__ = [
    "WARNING_SIGNALS",
    "install",
    "on_request",
    "received",
    "requested",
    "requeue",
    "restart_count",
]
