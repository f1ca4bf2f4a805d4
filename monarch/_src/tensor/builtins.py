"""`monarch.builtins`: small remote functions every mesh can run (torchmonarch's
`monarch.builtins.log` and `monarch.builtins.random`).

Each is a `remote` of a worker-side function of this module, called by its dotted path. Their
propagation never runs the function on the controller: seeding, logging or reading the RNG
state there would change or report the controller's own state, not the workers'. A function
with no result propagates None; one that returns RNG states learns their shapes from one
worker the first time ("cached").
"""

from __future__ import annotations

import logging
from typing import Any

from monarch._src.tensor.remote import remote

__all__ = [
    "get_rng_state_all_cuda_remote",
    "get_rng_state_remote",
    "log_remote",
    "logger",
    "manual_seed_all_cuda_remote",
    "manual_seed_cuda_remote",
    "random_seed_remote",
    "seed_remote",
    "set_logging_level_remote",
    "set_manual_seed_remote",
    "set_rng_state_all_cuda_remote",
    "set_rng_state_remote",
]

# The workers' logger of log_remote; set_logging_level_remote sets its level (not the root's).
logger = logging.getLogger("monarch.builtins.log")


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def _remote(name: str, propagate: Any = _nothing) -> Any:
    return remote(f"{__name__}.{name}", propagate=propagate)


# ---- the workers' side --------------------------------------------------------------------

def _log(*args: Any, level: int = logging.WARNING, **kwargs: Any) -> None:
    logger.log(level, *args, **kwargs)


def _set_level(level: int) -> None:
    logger.setLevel(level)


def _manual_seed(seed: int, process_idx: int = 0) -> None:
    import torch

    torch.manual_seed(seed ^ process_idx)  # torchmonarch's mix: each process_idx its stream


def _get_rng_state() -> Any:
    import torch

    return torch.get_rng_state()


def _set_rng_state(new_state: Any) -> None:
    import torch

    torch.set_rng_state(new_state)


def _seed() -> None:
    import torch

    torch.seed()  # a non-deterministic seed (its value does not travel: it may be a uint64)


def _cuda_manual_seed(seed: int) -> None:
    import torch

    torch.cuda.manual_seed(seed)  # without CUDA initialized yet: applied when it is


def _cuda_manual_seed_all(seed: int) -> None:
    import torch

    torch.cuda.manual_seed_all(seed)


def _cuda_get_rng_state_all() -> Any:
    import torch

    return torch.cuda.get_rng_state_all()  # one state per visible device ([] without CUDA)


def _cuda_set_rng_state_all(states: Any) -> None:
    import torch

    torch.cuda.set_rng_state_all(states)


# ---- the controller's side ----------------------------------------------------------------

log_remote = _remote("_log")
"""`log_remote(msg, *args, level=logging.WARNING)`: log on every worker of the active mesh."""
set_logging_level_remote = _remote("_set_level")
"""`set_logging_level_remote(level)`: the level of log_remote's logger on the workers."""
set_manual_seed_remote = _remote("_manual_seed")
"""`set_manual_seed_remote(seed, process_idx=0)`: `torch.manual_seed(seed ^ process_idx)`."""
get_rng_state_remote = _remote("_get_rng_state", "cached")
"""`get_rng_state_remote()`: each worker's CPU RNG state, as a distributed uint8 tensor."""
set_rng_state_remote = _remote("_set_rng_state")
"""`set_rng_state_remote(state)`: restore a state from get_rng_state_remote."""
seed_remote = _remote("_seed")
"""`seed_remote()`: seed each worker's RNG non-deterministically (`torch.seed()`)."""
random_seed_remote = seed_remote
"""`random_seed_remote()`: `torch.random.seed()`, the same function as `torch.seed()`."""
manual_seed_cuda_remote = _remote("_cuda_manual_seed")
manual_seed_all_cuda_remote = _remote("_cuda_manual_seed_all")
get_rng_state_all_cuda_remote = _remote("_cuda_get_rng_state_all", "cached")
set_rng_state_all_cuda_remote = _remote("_cuda_set_rng_state_all")
