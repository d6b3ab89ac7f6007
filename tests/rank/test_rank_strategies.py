"""Export-strategy registry and the four built-ins."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from trainlaunch import settings as tl_settings
from trainlaunch.rank import strategies
from trainlaunch.rank.strategies import (
    get_export_strategy,
    register_export_strategy,
    registered_strategies,
    sampled_ranks,
    should_export,
    unregister_export_strategy,
)
from trainlaunch.settings import RankSettings

BUILTINS = sorted(tl_settings.BUILTIN_STRATEGIES)


def never(settings: RankSettings, rank: int, world_size: int) -> bool:
    return False


def always(settings: RankSettings, rank: int, world_size: int) -> bool:
    return True


@pytest.fixture(autouse=True)
def restore_registry() -> Iterator[None]:
    """Tests register names; leave the process-wide registry as the built-ins only."""
    yield
    for name in registered_strategies():
        # Restores an overridden built-in; a built-in never overridden raises ValueError.
        with contextlib.suppress(ValueError):
            unregister_export_strategy(name)
    assert registered_strategies() == BUILTINS


def selected(settings: RankSettings, world_size: int) -> list[int]:
    return [r for r in range(world_size) if should_export(settings, r, world_size)]


# --- registry ------------------------------------------------------------------------------------
def test_builtins_registered_and_shared_with_settings() -> None:
    assert registered_strategies() == BUILTINS
    assert strategies.BUILTIN_STRATEGIES is tl_settings.BUILTIN_STRATEGIES


def test_unknown_name_error_lists_registered_names() -> None:
    with pytest.raises(ValueError, match="unknown export strategy 'nope'") as info:
        get_export_strategy("nope")
    for name in BUILTINS:
        assert name in str(info.value)


def test_register_select_and_unregister_custom_strategy() -> None:
    register_export_strategy("myproj:never", never)
    assert "myproj:never" in registered_strategies()
    settings = RankSettings(export_strategy="myproj:never")
    assert selected(settings, 4) == []
    with pytest.raises(ValueError, match="already registered"):
        register_export_strategy("myproj:never", never)
    register_export_strategy("myproj:never", always, allow_override=True)
    assert selected(settings, 3) == [0, 1, 2]
    unregister_export_strategy("myproj:never")
    with pytest.raises(ValueError, match="unknown export strategy"):
        should_export(settings, 0, 1)
    with pytest.raises(ValueError, match="unknown export strategy"):
        unregister_export_strategy("myproj:never")


@pytest.mark.parametrize(
    ("name", "fn", "match"),
    [
        ("", never, "non-empty"),
        ("myproj:x", "not callable", "callable"),
        ("every_other", never, "must be qualified"),
    ],
)
def test_register_rejects_bad_input(name: str, fn: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        register_export_strategy(name, fn)  # type: ignore[arg-type]


def test_builtins_are_protected_and_an_override_can_be_undone() -> None:
    with pytest.raises(ValueError, match="already built-in"):
        register_export_strategy("all_ranks", never)
    with pytest.raises(ValueError, match="built-in and cannot be removed"):
        unregister_export_strategy("all_ranks")
    register_export_strategy("all_ranks", never, allow_override=True)
    assert selected(RankSettings(), 2) == []
    unregister_export_strategy("all_ranks")  # restores the original
    assert selected(RankSettings(), 2) == [0, 1]


def test_registry_is_consistent_under_threads() -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker(index: int) -> None:
        try:
            start.wait()
            for i in range(200):
                name = f"t{index}:s{i}"
                register_export_strategy(name, never)
                assert name in registered_strategies()
                assert get_export_strategy(name) is never
                unregister_export_strategy(name)
        except BaseException as error:  # collected and re-raised in the main thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert registered_strategies() == BUILTINS


# --- built-ins -----------------------------------------------------------------------------------
def test_all_ranks() -> None:
    assert selected(RankSettings(), 5) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(("export_rank", "expected"), [(0, [0]), (2, [2]), (-1, [3])])
def test_single_rank(export_rank: int, expected: list[int]) -> None:
    settings = RankSettings(export_strategy="single_rank", export_rank=export_rank)
    assert selected(settings, 4) == expected


def test_single_rank_out_of_range_is_an_error_not_silence() -> None:
    settings = RankSettings(export_strategy="single_rank", export_rank=4)
    with pytest.raises(ValueError, match="out of range for world size 4"):
        should_export(settings, 0, 4)


@pytest.mark.parametrize(("rank", "world_size"), [(-1, 2), (2, 2), (0, 0), (True, 2)])
def test_should_export_rejects_bad_positions(rank: int, world_size: int) -> None:
    with pytest.raises(ValueError):
        should_export(RankSettings(), rank, world_size)


def test_first_rank_per_node(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = RankSettings(export_strategy="first_rank_per_node")
    assert should_export(settings, 5, 8)  # nothing set: a single process on one node
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert not should_export(settings, 5, 8)
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert should_export(settings, 4, 8)
    monkeypatch.delenv("LOCAL_RANK")
    monkeypatch.setenv("SLURM_LOCALID", "2")  # plain srun sets only its own name
    assert not should_export(settings, 2, 8)
    monkeypatch.setenv("LOCAL_RANK", "zero")
    with pytest.raises(ValueError, match="LOCAL_RANK must be an integer"):
        should_export(settings, 0, 8)


# --- sampled -------------------------------------------------------------------------------------
RATES = (0.001, 0.01, 0.05, 0.1, 0.25, 1 / 3, 0.5, 0.9, 0.99)


def test_sampled_count_tracks_rate_at_every_world_size() -> None:
    for world_size in range(1, 1025):
        previous: frozenset[int] = frozenset()
        for rate in RATES:
            chosen = sampled_ranks(rate, world_size)
            expected = rate * world_size
            assert len(chosen) >= 1, (rate, world_size)
            assert abs(len(chosen) - expected) <= 0.5 or (len(chosen) == 1 and expected < 0.5), (
                rate,
                world_size,
                len(chosen),
            )
            assert chosen <= frozenset(range(world_size))
            assert previous <= chosen, "a higher rate must keep the ranks of a lower one"
            previous = chosen
        assert sampled_ranks(0.0, world_size) == frozenset()
        assert sampled_ranks(1.0, world_size) == frozenset(range(world_size))


@pytest.mark.parametrize("world_size", [1, 7, 64, 1000])
def test_sampled_strategy_agrees_with_sampled_ranks(world_size: int) -> None:
    settings = RankSettings(export_strategy="sampled", export_sample_rate=0.1, seed=7)
    assert selected(settings, world_size) == sorted(sampled_ranks(0.1, world_size, 7))


def test_sampled_fixes_upstream_small_world_and_varies_with_seed() -> None:
    settings = RankSettings(export_strategy="sampled", export_sample_rate=0.01)
    assert len(selected(settings, 8)) == 1  # upstream md5 sampling selects nobody here
    picks = {sampled_ranks(0.25, 64, seed) for seed in range(5)}
    assert len(picks) == 5, "the seed must vary which ranks export"


def test_sampled_golden_selection() -> None:
    # Pinned: blake2b/SHAKE are standard, so this may never change across Python versions.
    assert sorted(sampled_ranks(0.25, 16, 95050)) == [2, 3, 5, 12]
    assert sorted(sampled_ranks(0.1, 64, 1)) == [4, 6, 10, 49, 57, 62]


def test_sampled_is_identical_in_other_interpreters(helpers: Any) -> None:
    code = """
        import json
        from trainlaunch.rank.strategies import should_export
        from trainlaunch.settings import RankSettings
        s = RankSettings(export_strategy="sampled", export_sample_rate=0.05, seed=123)
        print(json.dumps([r for r in range(300) if should_export(s, r, 300)]))
    """
    runs = [helpers.run_child(code, PYTHONHASHSEED=str(salt)) for salt in (1, 2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    here = selected(RankSettings(export_strategy="sampled", export_sample_rate=0.05, seed=123), 300)
    assert json.loads(runs[0].stdout) == json.loads(runs[1].stdout) == here
    assert len(here) == 15
