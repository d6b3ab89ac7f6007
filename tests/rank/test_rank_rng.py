"""Seeding, ranked streams, scoped and stateful RNG, weights-only state, legacy pickles."""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
import random
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from trainlaunch.rank.rng import (
    RNGState,
    ScopedRNG,
    StatefulRNG,
    derive_seed,
    get_rng_state,
    init_all_rng,
    set_rng_state,
)


@pytest.fixture(autouse=True)
def keep_global_rng() -> Iterator[None]:
    """These tests reseed the process: give the next test the generators it would have had."""
    saved = get_rng_state()
    yield
    set_rng_state(saved)


def draws() -> tuple[Any, ...]:
    """One draw from every generator, including the cached-gaussian paths."""
    return (
        random.random(),
        random.gauss(0, 1),
        np.random.rand(),
        np.random.standard_normal(),
        torch.rand(3).tolist(),
        torch.randn(2).tolist(),
    )


def draws_after(seed: int, ranked: bool = False) -> tuple[Any, ...]:
    init_all_rng(seed, ranked)
    return draws()


# --- init_all_rng ----------------------------------------------------------------------------------
def test_same_seed_same_draws_different_seed_different_draws() -> None:
    assert draws_after(42) == draws_after(42)
    assert draws_after(42) != draws_after(43)
    assert init_all_rng(42) == 42


def test_seed_matches_the_usual_idiom_when_unranked() -> None:
    init_all_rng(5)
    ours = draws()
    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    assert draws() == ours


@pytest.mark.parametrize(
    ("seed", "error"),
    [
        (True, TypeError),
        (1.5, TypeError),
        ("3", TypeError),
        (-1, ValueError),
        (2**64, ValueError),
    ],  # fmt: skip
)
def test_bad_seeds_raise_real_exceptions(seed: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        init_all_rng(seed)


def test_large_and_numpy_seeds() -> None:
    assert draws_after(2**32) == draws_after(2**32)
    assert len({draws_after(s)[2] for s in (0, 1, 2**32, 2**32 + 1, 2**64 - 1)}) == 5
    assert draws_after(np.int64(7)) == draws_after(7)  # type: ignore[arg-type]


def test_default_rng_is_seeded_from_the_returned_seed() -> None:
    first = np.random.default_rng(init_all_rng(9, ranked=True)).random()
    assert np.random.default_rng(init_all_rng(9, ranked=True)).random() == first


# --- ranked ----------------------------------------------------------------------------------------
def test_ranked_streams_use_rank_env_before_any_process_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    per_rank = []
    for rank in range(8):
        monkeypatch.setenv("RANK", str(rank))
        per_rank.append(draws_after(42, ranked=True))
        assert init_all_rng(42, ranked=True) == derive_seed(42, rank)
    assert len({d[0] for d in per_rank}) == 8
    monkeypatch.delenv("RANK")
    assert draws_after(42, ranked=True) == per_rank[0]  # no RANK: rank 0


def test_ranked_streams_do_not_collide_across_neighbouring_seeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RANK", "1")
    seed_42_rank_1 = draws_after(42, ranked=True)
    monkeypatch.setenv("RANK", "0")
    assert seed_42_rank_1 != draws_after(43, ranked=True)  # seed + rank would collide here
    assert seed_42_rank_1 != draws_after(43) and seed_42_rank_1 != draws_after(42)
    seeds = {derive_seed(s, r) for s in range(64) for r in range(64)}
    assert len(seeds) == 64 * 64


def test_derive_seed_is_pinned() -> None:
    # blake2b is standard: this value must never change across Python versions or machines.
    payload = (42).to_bytes(8, "big") + (1).to_bytes(8, "big")
    digest = hashlib.blake2b(payload, digest_size=8, person=b"tl-rank-seed").digest()
    assert derive_seed(42, 1) == int.from_bytes(digest, "big") == 0x4F2AC2D0F5345231


def test_bad_rank_env_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "first")
    with pytest.raises(ValueError, match="RANK must be an integer"):
        init_all_rng(1, ranked=True)


# --- ScopedRNG -------------------------------------------------------------------------------------
def test_scoped_rng_seeds_inside_and_restores_after_an_exception() -> None:
    init_all_rng(1)
    draws()
    expected_outside = get_rng_state()
    expected_next = draws()
    set_rng_state(expected_outside)
    with pytest.raises(KeyError), ScopedRNG(seed=7):
        assert draws() == draws_after(7)
        raise KeyError("boom")
    assert draws() == expected_next


def test_scoped_rng_nesting() -> None:
    scope = ScopedRNG(3)
    with scope:
        inner_expected = draws_after(4)
        init_all_rng(3)
        with ScopedRNG(4):
            assert draws() == inner_expected
        after_inner = draws()
        with pytest.raises(RuntimeError, match="already active"):
            scope.__enter__()
    init_all_rng(3)
    assert draws() == after_inner


# --- StatefulRNG and state ------------------------------------------------------------------------
def leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for item in value.values():
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)
    else:
        yield value


def test_state_round_trips_through_weights_only_load(tmp_path: Path) -> None:
    rng = StatefulRNG(11)
    random.gauss(0, 1)  # leaves a cached gaussian in `random`'s state
    np.random.standard_normal()  # and in numpy's (has_gauss = 1)
    state = rng.state_dict()
    assert {type(leaf) for leaf in leaves(state)} <= {str, int, torch.Tensor}
    torch.save(state, tmp_path / "rng.pt")
    expected = draws()
    draws()
    rng.load_state_dict(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert draws() == expected


def test_malformed_state_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="format"):
        set_rng_state({"python_state": []})
    state = get_rng_state()
    del state["torch_state"]
    with pytest.raises(ValueError, match="malformed"):
        set_rng_state(state)


def test_cuda_states_without_matching_devices_warn_and_continue() -> None:
    state = get_rng_state()
    devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    one = torch.cuda.get_rng_state(0) if devices else torch.get_rng_state()
    state["cuda_states"] = [one] * (devices + 1)  # one more generator than devices here
    with pytest.warns(RuntimeWarning, match="CUDA generator"):
        set_rng_state(state)


# --- legacy pickled RNGState -----------------------------------------------------------------------
def legacy_file(tmp_path: Path) -> tuple[Path, tuple[Any, ...]]:
    """A legacy state pickled under NeMo Automodel's class path, and the draws it leads to."""
    module = types.ModuleType("nemo_automodel.components.training.rng")

    @dataclasses.dataclass
    class LegacyRNGState:  # the shape of upstream's pre-#3240 dataclass
        random_rng_state: Any
        np_rng_state: Any
        torch_rng_state: Any
        cuda_rng_state: Any

    LegacyRNGState.__module__ = module.__name__
    LegacyRNGState.__qualname__ = LegacyRNGState.__name__ = "RNGState"
    module.RNGState = LegacyRNGState  # type: ignore[attr-defined]
    names = [module.__name__]
    for parent in (
        "nemo_automodel",
        "nemo_automodel.components",
        "nemo_automodel.components.training",
    ):
        names.append(parent)
    saved = {name: sys.modules.get(name) for name in names}
    sys.modules.update({name: module for name in names})
    try:
        init_all_rng(21)
        state = LegacyRNGState(random.getstate(), np.random.get_state(), torch.get_rng_state(), [])
        torch.save(state, tmp_path / "legacy.pt")
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return tmp_path / "legacy.pt", draws()


def test_legacy_state_needs_the_explicit_trusted_path(tmp_path: Path) -> None:
    path, expected = legacy_file(tmp_path)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)
    legacy = RNGState.load_trusted(path)
    assert isinstance(legacy, RNGState)
    StatefulRNG(0).load_state_dict(legacy)
    assert draws() == expected


def test_trusted_load_rejects_other_objects(tmp_path: Path) -> None:
    torch.save({"not": "a state"}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not an RNGState"):
        RNGState.load_trusted(tmp_path / "other.pt")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_state_round_trips_and_scoped_rng_restores_it(tmp_path: Path) -> None:
    torch.cuda.init()
    rng = StatefulRNG(3)
    state = rng.state_dict()
    assert len(state["cuda_states"]) == torch.cuda.device_count()
    torch.save(state, tmp_path / "rng.pt")
    expected = torch.rand(4, device="cuda").tolist()
    rng.load_state_dict(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert torch.rand(4, device="cuda").tolist() == expected
    before = torch.cuda.get_rng_state()
    with pytest.raises(KeyError), ScopedRNG(1):
        torch.rand(5, device="cuda")
        raise KeyError
    assert torch.equal(torch.cuda.get_rng_state(), before)
