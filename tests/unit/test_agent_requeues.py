"""The pod's attempt from the Job controller's counts (agent/requeues.py), and the rank's view."""

from __future__ import annotations

import pytest

from trainlaunch import settings
from trainlaunch.agent.requeues import PodAttempt, after_requeue, pod_attempt
from trainlaunch.rank import preemption

F, R, M = settings.INDEX_FAILURES, settings.INDEX_REQUEUES, settings.MAX_REQUEUES


def test_outside_kubernetes_nothing_changes() -> None:
    assert pod_attempt({}) == PodAttempt()
    assert pod_attempt({settings.RESTART_COUNT: "2"}) == PodAttempt()


@pytest.mark.parametrize(
    "env, attempt",
    [
        ({F: "0", R: "", M: "3"}, "0"),  # no requeue yet: the controller leaves the annotation out
        ({F: "2", R: "1", M: "3"}, "3"),
        ({F: "0", R: "3", M: "3"}, "3"),  # the last requeue allowed
        ({F: "1", R: "7"}, "8"),  # no limit given: count only
    ],
)
def test_the_attempt_is_failures_plus_requeues(env: dict[str, str], attempt: str) -> None:
    assert pod_attempt(env) == PodAttempt(env={settings.RESTART_COUNT: attempt})


def test_one_requeue_too_many_ends_the_pod() -> None:
    got = pod_attempt({F: "0", R: "2", M: "1", settings.REPLICA_ID: "3"})
    assert got.exit_code == settings.REQUEUES_EXHAUSTED_EXIT_CODE
    assert got.note.startswith("trainlaunch: requeues exhausted: replica 3 was requeued 2 times")
    assert "max_requeues=1" in got.note and "\n" not in got.note


def test_missing_or_unreadable_counts_are_said_not_guessed() -> None:
    old = pod_attempt({F: "", R: "", M: "3"})  # the cluster dropped backoffLimitPerIndex
    assert not old.env and old.exit_code is None and "older than 1.29" in old.note
    bad = pod_attempt({F: "x", R: "1", M: "3"})
    assert not bad.env and bad.exit_code is None and "unreadable" in bad.note


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, 0),
        ({settings.RESTART_COUNT: "4", F: "1", R: "1"}, 4),  # the agent's value wins
        ({F: "1", R: "2"}, 3),  # a pod without the agent: the counts themselves
        ({F: "1", R: ""}, 1),
        ({F: "", R: ""}, 0),
    ],
)
def test_the_rank_library_agrees(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: int
) -> None:
    for name in (settings.RESTART_COUNT, F, R):
        monkeypatch.delenv(name, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert preemption.restart_count() == expected


@pytest.mark.parametrize(
    "env, ends",
    [
        ({F: "0", R: "", M: "3"}, False),
        ({F: "0", R: "2", M: "3"}, False),  # this requeue is the third: allowed
        ({F: "0", R: "3", M: "3"}, True),  # a fourth is not
        ({F: "1", R: "", M: "0"}, True),  # max_requeues=0: none at all
        ({F: "", R: "", M: "0"}, False),  # no counts (older cluster): nothing to enforce
        ({}, False),  # local, Slurm
    ],
)
def test_a_requeue_beyond_the_limit_ends_the_job_instead(env: dict[str, str], ends: bool) -> None:
    got = after_requeue({settings.REPLICA_ID: "1", **env})
    assert (got.exit_code == settings.REQUEUES_EXHAUSTED_EXIT_CODE) is ends
    assert got.note.startswith("trainlaunch: requeues exhausted: replica 1 asked") is ends
