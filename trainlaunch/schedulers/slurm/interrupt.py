"""Ctrl-C on a Slurm app (``run --wait``, ``run --log``): its ranks get SIGINT first, as
torchrun passes Ctrl-C on, so their ``except KeyboardInterrupt`` runs (docs/slurm.md).

``scancel --signal=INT`` signals every task of the job's steps, not the batch script: a node
agent passes SIGINT on to its ranks, gives them its ``--shutdown-timeout``, then SIGTERM, then
SIGKILL (agent/node.py); a role without an agent gets it in its own processes. Before
signalling, the CLI marks the job dir (``.interrupted``), so the batch script neither retries
nor requeues the attempt the interrupt ended (attempts.py), and status tells that end as an
interrupt (CANCELLED, ``interrupted (Ctrl-C)``), not as a failure. A job still running
``WAIT_S`` later is cancelled as ``stop`` cancels it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from trainlaunch.diagnosis.values import STOPPED, Diagnosis
from trainlaunch.errors import StoreError
from trainlaunch.node.processes import INTERRUPT_TERM_S
from trainlaunch.schedulers.slurm import jobdir
from trainlaunch.specs import AppState, AppStatus, RoleStatus

INTERRUPTED_FILE = ".interrupted"  # dot: no role (a directory here) can be named so
AGENT_GRACE_S = 30.0  # the node agent's --shutdown-timeout when none is given (torchrun's)
WAIT_S = AGENT_GRACE_S + INTERRUPT_TERM_S + 15.0  # then scancel (SIGTERM, KillWait, SIGKILL)
MSG = "interrupted (Ctrl-C)"
HOW = (
    "interrupted by Ctrl-C (scancel --signal=INT: SIGINT to every task of the job's steps; "
    "a node agent gives its ranks its --shutdown-timeout, then SIGTERM, then SIGKILL)"
)


def mark(job_dir: Path | None) -> None:
    """Say in the job dir that Ctrl-C ends this job (the batch script and status read it)."""
    if job_dir is not None and not marked(job_dir):
        # unmarked (a job dir gone or unsafe), the interrupt still goes out: a retried attempt
        # is then scancelled after WAIT_S
        with contextlib.suppress(StoreError):
            jobdir.write_new(job_dir, INTERRUPTED_FILE, "ctrl-c\n")


def marked(job_dir: Path | None) -> bool:
    """Whether Ctrl-C was sent to this job (mark)."""
    return job_dir is not None and (job_dir / INTERRUPTED_FILE).is_file()


def batch_guard(job_dir_word: str) -> str:
    """A shell test, true unless Ctrl-C ended the attempt (then no retry and no requeue)."""
    return f'[ ! -e "{job_dir_word}/{INTERRUPTED_FILE}" ]'


def ended_it(status: AppStatus, job_dir: Path | None) -> bool:
    """Whether Ctrl-C ended this job: it ended, not well, after mark."""
    return status.is_terminal and status.state != AppState.SUCCEEDED and marked(job_dir)


def as_interrupted(status: AppStatus) -> AppStatus:
    """A job Ctrl-C ended: CANCELLED with the interrupt's message; replicas that did not
    succeed are CANCELLED too (a rank's exit 130 is its answer to the SIGINT, not a fault)."""
    if not status.is_terminal or status.state == AppState.SUCCEEDED:
        return status
    roles = tuple(
        RoleStatus(
            role.role,
            tuple(
                r
                if r.state == AppState.SUCCEEDED
                else dataclasses.replace(r, state=AppState.CANCELLED)
                for r in role.replicas
            ),
        )
        for role in status.roles
    )
    return dataclasses.replace(status, state=AppState.CANCELLED, msg=MSG, roles=roles)


def failure() -> Diagnosis:
    """describe's ``why`` for a job Ctrl-C ended."""
    return Diagnosis(STOPPED, HOW)


__all__ = [
    "INTERRUPTED_FILE",
    "WAIT_S",
    "as_interrupted",
    "ended_it",
    "batch_guard",
    "failure",
    "mark",
    "marked",
]
