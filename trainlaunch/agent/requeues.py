"""The pod's attempt on Kubernetes: TRAINLAUNCH_RESTART_COUNT and the requeue limit.

An Indexed Job with ``backoffLimitPerIndex`` (Kubernetes 1.29+) annotates each pod with its
index's failures so far and the failures its ``podFailurePolicy`` ignored (requeues: exit 75,
preemption, eviction); the manifest hands both to the container through the downward API
(render.py). Before any rank starts, the agent turns them into the rank's attempt number and
ends a pod that comes after its replica's last allowed requeue with the code the Job's
``FailJob`` rule matches; when the ranks ask for one requeue more than allowed, it ends with
that code instead of 75. Elsewhere (local, Slurm) the variables are absent: nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainlaunch import settings
from trainlaunch.values import frozen


@frozen
class PodAttempt:
    """What the counts say: variables for the ranks, a line for the log, and whether to stop."""

    env: Mapping[str, str] | None = None  # None: none to add
    note: str = ""  # one line for the pod log ('' = nothing to say)
    exit_code: int | None = None  # set: end the pod at once with this code


def _count(raw: str | None) -> int | None:
    """An annotation's count: '' (absent) is 0, garbage is None (as the controller reads it)."""
    text = (raw or "").strip()
    if not text:
        return 0
    return int(text) if text.isdigit() else None


def pod_attempt(environ: Mapping[str, str]) -> PodAttempt:
    """The attempt this pod runs, from the Job controller's counts in environ."""
    if settings.INDEX_FAILURES not in environ:
        return PodAttempt()  # not a pod of a per-index Job (local, Slurm, older manifests)
    if not environ[settings.INDEX_FAILURES].strip():
        # backoffLimitPerIndex always annotates the count, even 0: the cluster dropped the field
        return PodAttempt(
            note="trainlaunch: this pod has no batch.kubernetes.io/job-index-failure-count "
            "annotation (Kubernetes older than 1.29, or backoffLimitPerIndex disabled): "
            f"{settings.RESTART_COUNT} is unknown and max_requeues is not enforced"
        )
    failures = _count(environ.get(settings.INDEX_FAILURES))
    requeues = _count(environ.get(settings.INDEX_REQUEUES))
    if failures is None or requeues is None:
        return PodAttempt(note="trainlaunch: unreadable failure-count annotations; attempt unknown")
    env = {settings.RESTART_COUNT: str(failures + requeues)}
    limit = _count(environ.get(settings.MAX_REQUEUES))
    replica = environ.get(settings.REPLICA_ID, "?")
    if limit is not None and settings.MAX_REQUEUES in environ and requeues > limit:
        return PodAttempt(
            env=env,
            note=f"trainlaunch: requeues exhausted: replica {replica} was requeued {requeues} "
            f"times (preempted, evicted or exit {settings.REQUEUE_EXIT_CODE}), max_requeues="
            f"{limit}; failing the Job (exit {settings.REQUEUES_EXHAUSTED_EXIT_CODE})",
            exit_code=settings.REQUEUES_EXHAUSTED_EXIT_CODE,
        )
    return PodAttempt(env=env)


def after_requeue(environ: Mapping[str, str]) -> PodAttempt:
    """The pod's ranks asked for a requeue (exit 75): end the Job instead if none is left.

    Saves a replacement pod that would wait for its node only to stop at once. A pod that was
    preempted is ignored by the Job whatever its code; its replacement stops then.
    """
    if not (environ.get(settings.INDEX_FAILURES) or "").strip():
        return PodAttempt()  # no counts: nothing to enforce
    requeues = _count(environ.get(settings.INDEX_REQUEUES))
    limit = _count(environ.get(settings.MAX_REQUEUES))
    if requeues is None or limit is None or settings.MAX_REQUEUES not in environ:
        return PodAttempt()
    if requeues < limit:
        return PodAttempt()
    replica = environ.get(settings.REPLICA_ID, "?")
    return PodAttempt(
        note=f"trainlaunch: requeues exhausted: replica {replica} asked for requeue "
        f"{requeues + 1} (exit {settings.REQUEUE_EXIT_CODE}), max_requeues={limit}; failing "
        f"the Job (exit {settings.REQUEUES_EXHAUSTED_EXIT_CODE})",
        exit_code=settings.REQUEUES_EXHAUSTED_EXIT_CODE,
    )
