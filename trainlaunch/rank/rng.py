"""Seeding and RNG state for Python, numpy and torch (API of NeMo Automodel's ``rng``).

* ``init_all_rng(seed)`` seeds ``random``, numpy's legacy global generator and torch (CPU and,
  through ``torch.manual_seed``, every CUDA device). numpy's ``default_rng()`` has no global
  state to seed: build it from the returned seed, ``np.random.default_rng(init_all_rng(s))``.
* ``ranked=True`` gives every rank its own stream: the seed used is
  ``derive_seed(seed, rank)``, a 64-bit blake2b digest of ``(seed, rank)``, with the rank from
  ``torch.distributed`` if initialized, else ``$RANK`` (torchrun sets it before any process
  group exists), else 0. ``seed + rank`` is not used: (42, rank 1) would equal (43, rank 0).
* Seeds are integers in ``[0, 2**64)``. numpy's legacy generator takes 32-bit seeds, so a seed of
  ``2**32`` or more is passed to it as the two 32-bit words ``[low, high]``: deterministic, and
  distinct for distinct seeds.
* ``state_dict()`` holds only str, int, list and tensor leaves, so it round-trips through
  ``torch.save`` / ``torch.load(weights_only=True)``. CUDA generators are captured only if CUDA
  is already initialized here: capturing them would initialize CUDA on every visible device.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import operator
import os
import pickle
import random
import sys
import types
import warnings
from types import TracebackType
from typing import Any

from trainlaunch.settings import DEFAULT_SEED

__all__ = [
    "RNGState",
    "ScopedRNG",
    "StatefulRNG",
    "derive_seed",
    "get_rng_state",
    "init_all_rng",
    "rank_from_env",
    "set_rng_state",
]

STATE_FORMAT = "trainlaunch.rng/1"
_LEGACY_CLASS_PATHS = {  # pickled legacy states name the class by its module path
    ("nemo_automodel.components.training.rng", "RNGState"),
    (__name__, "RNGState"),
}


def _optional(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool):
        raise TypeError("seed must be an integer, got a bool")
    try:
        value = operator.index(seed)  # accepts numpy integers, rejects floats
    except TypeError:
        raise TypeError(f"seed must be an integer, got {type(seed).__name__}") from None
    if not 0 <= value < 2**64:
        raise ValueError(f"seed must be in [0, 2**64), got {value}")
    return value


def rank_from_env() -> int:
    """The global rank: torch.distributed's if initialized, else ``$RANK``, else 0."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    raw = os.environ.get("RANK", "").strip()
    try:
        return int(raw) if raw else 0
    except ValueError:
        raise ValueError(f"RANK must be an integer, got {raw!r}") from None


def derive_seed(seed: int, rank: int) -> int:
    """A 64-bit seed for ``rank``'s stream, well mixed and distinct per (seed, rank)."""
    seed = _check_seed(seed)
    if rank < 0:
        raise ValueError(f"rank must be >= 0, got {rank}")
    payload = seed.to_bytes(8, "big") + rank.to_bytes(8, "big")
    digest = hashlib.blake2b(payload, digest_size=8, person=b"tl-rank-seed").digest()
    return int.from_bytes(digest, "big")  # byteorder is required on Python 3.10


def _numpy_seed(seed: int) -> int | list[int]:
    return seed if seed < 2**32 else [seed & 0xFFFFFFFF, seed >> 32]


def init_all_rng(seed: int, ranked: bool = False) -> int:
    """Seed random, numpy (legacy global) and torch (incl. CUDA); returns the seed used."""
    seed = _check_seed(seed)
    if not isinstance(ranked, bool):
        raise TypeError(f"ranked must be a bool, got {type(ranked).__name__}")
    used = derive_seed(seed, rank_from_env()) if ranked else seed
    random.seed(used)
    np = _optional("numpy")
    if np is not None:
        np.random.seed(_numpy_seed(used))
    torch = _optional("torch")
    if torch is not None:
        torch.manual_seed(used)  # seeds the CPU generator and every CUDA device's
    return used


# --- state -------------------------------------------------------------------------------------
def get_rng_state() -> dict[str, Any]:
    """Snapshot of every generator, made of str, int, list and tensor leaves only."""
    import torch

    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {
        "format": STATE_FORMAT,
        "python_version": version,
        "python_state": torch.tensor(internal, dtype=torch.int64),
        # floats travel inside tensors so that the leaves stay tensors, ints, strs and lists
        "python_gauss": torch.tensor([] if gauss is None else [gauss], dtype=torch.float64),
        "torch_state": torch.get_rng_state(),
        "cuda_states": [],
    }
    np = _optional("numpy")
    if np is not None:
        name, keys, pos, has_gauss, cached = np.random.get_state()
        state["numpy_bit_generator"] = str(name)
        state["numpy_keys"] = torch.from_numpy(keys.astype(np.int64))
        state["numpy_pos"] = int(pos)
        state["numpy_has_gauss"] = int(has_gauss)
        state["numpy_gauss"] = torch.tensor([cached], dtype=torch.float64)
    if torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        state["cuda_states"] = [
            torch.cuda.get_rng_state(i) for i in range(torch.cuda.device_count())
        ]
    return state


def set_rng_state(state: dict[str, Any] | RNGState) -> None:
    """Restore a snapshot from :func:`get_rng_state` (or a trusted legacy :class:`RNGState`)."""
    if isinstance(state, RNGState):
        _restore_legacy(state)
        return
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise ValueError(f"not an RNG state of format {STATE_FORMAT!r}")
    import torch

    try:
        gauss = state["python_gauss"].tolist()
        internal = tuple(state["python_state"].tolist())
        random.setstate((int(state["python_version"]), internal, gauss[0] if gauss else None))
        if "numpy_keys" in state:
            np = _optional("numpy")
            if np is None:
                raise ValueError("the state holds numpy's generator but numpy is not installed")
            np.random.set_state((
                state["numpy_bit_generator"],
                state["numpy_keys"].numpy().astype(np.uint32),
                int(state["numpy_pos"]),
                int(state["numpy_has_gauss"]),
                float(state["numpy_gauss"].item()),
            ))  # fmt: skip
        torch.set_rng_state(state["torch_state"].cpu())
    except (KeyError, AttributeError, TypeError) as error:
        raise ValueError(f"malformed RNG state: {error!r}") from None
    _restore_cuda(state["cuda_states"])


def _restore_cuda(states: list[Any]) -> None:
    if not states:
        return
    import torch

    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if available != len(states):
        # transformers#14994: resuming on fewer GPUs must not fail; say what is lost.
        warnings.warn(
            f"RNG state has {len(states)} CUDA generator(s), this process sees {available}; "
            f"restoring {min(available, len(states))}",
            RuntimeWarning,
            stacklevel=3,
        )
    for index, cuda_state in enumerate(states[:available]):
        torch.cuda.set_rng_state(cuda_state.cpu(), index)


@dataclasses.dataclass
class RNGState:
    """Legacy pickled RNG state; load it only through :meth:`load_trusted`."""

    random_rng_state: tuple[Any, ...]
    np_rng_state: tuple[Any, ...]
    torch_rng_state: Any
    cuda_rng_state: list[Any]

    @classmethod
    def load_trusted(cls, path: str | os.PathLike[str]) -> RNGState:
        """Unpickle a legacy state file. This runs code from the file: trusted files only."""
        import torch

        loaded = torch.load(path, map_location="cpu", weights_only=False, pickle_module=_legacy)
        if not isinstance(loaded, cls):
            raise ValueError(f"{os.fspath(path)} holds {type(loaded).__name__}, not an RNGState")
        return loaded


class _LegacyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _LEGACY_CLASS_PATHS:
            return RNGState  # NeMo Automodel's legacy class, without needing that package
        return super().find_class(module, name)


# torch.load takes a "pickle module"; only its Unpickler differs from the real one.
_legacy = types.SimpleNamespace(
    Unpickler=_LegacyUnpickler, load=pickle.load, __name__="trainlaunch_legacy_pickle"
)


def _restore_legacy(state: RNGState) -> None:
    import torch

    version, internal, gauss = state.random_rng_state
    random.setstate((version, tuple(internal), gauss))  # tuples may come back as lists
    np = _optional("numpy")
    if np is not None:
        np.random.set_state(tuple(state.np_rng_state))
    torch.set_rng_state(state.torch_rng_state.cpu())
    _restore_cuda(list(state.cuda_rng_state))


# --- classes -----------------------------------------------------------------------------------
class ScopedRNG:
    """Seed every generator on entry; restore the previous states on exit, even on error."""

    def __init__(self, seed: int = DEFAULT_SEED, ranked: bool = False) -> None:
        self.seed = _check_seed(seed)
        self.ranked = ranked
        self._saved: dict[str, Any] | None = None

    def __enter__(self) -> ScopedRNG:
        if self._saved is not None:
            raise RuntimeError("this ScopedRNG is already active; use a new instance to nest")
        saved = get_rng_state()
        init_all_rng(self.seed, self.ranked)
        self._saved = saved
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        saved, self._saved = self._saved, None
        if saved is not None:
            set_rng_state(saved)


class StatefulRNG:
    """Seeds every generator now (a global side effect) and saves/restores their states."""

    def __init__(self, seed: int, ranked: bool = False) -> None:
        self.seed = _check_seed(seed)
        self.ranked = ranked
        self.used_seed = init_all_rng(self.seed, ranked)

    def state_dict(self) -> dict[str, Any]:
        """The current (process-global) states; safe for ``torch.load(weights_only=True)``."""
        return get_rng_state()

    def load_state_dict(self, state: dict[str, Any] | RNGState) -> None:
        """Restore states saved by :meth:`state_dict` (or a trusted legacy RNGState)."""
        set_rng_state(state)
