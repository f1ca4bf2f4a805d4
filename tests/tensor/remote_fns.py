"""Functions the tensor-engine tests run on workers by dotted path (importable on procs)."""

from __future__ import annotations

import threading

import torch


def add_rank_bias(x: torch.Tensor, bias: float) -> torch.Tensor:
    """`x + bias`, with a second output: the sum of `x`."""
    return x + bias


def split_two(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two outputs of different shapes."""
    return x * 2, x.sum()


def fail_always(x: torch.Tensor) -> torch.Tensor:
    """Raise on the worker, to poison what depends on the result."""
    raise ValueError("remote function failed on purpose")


def env_vars() -> dict[str, str]:
    """The tensor-engine worker environment variables of this proc."""
    import os

    return {k: os.environ.get(k, "") for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                               "LOCAL_WORLD_SIZE", "CUDA_VISIBLE_DEVICES")}


def append_to(box: list[int], value: int) -> int:
    """Mutate a worker-local object (an OpaqueRef) and return its length."""
    box.append(value)
    return len(box)


# ---- a gate that blocks a worker until an actor on the same proc opens it ---------------------
_gate = threading.Event()


def wait_gate(x: torch.Tensor) -> torch.Tensor:
    """Block this proc's worker until `open_gate` runs on the same proc (bounded)."""
    if not _gate.wait(timeout=30):
        raise TimeoutError("the gate was never opened")
    _gate.clear()
    return x + 1


def open_gate() -> None:
    """Release `wait_gate` on this proc."""
    _gate.set()


def group_sum(x: torch.Tensor, group: object) -> torch.Tensor:
    """Sum `x` over a RemoteProcessGroup with the raw process group API."""
    out = x.clone()
    group.allreduce([out]).wait()  # type: ignore[attr-defined]
    return out


def set_device(index: int) -> None:
    """Call torch.cuda.set_device on the worker."""
    torch.cuda.set_device(index)


def fail_on_rank_one(x: torch.Tensor) -> torch.Tensor:
    """Fail only on engine rank 1."""
    import os

    if os.environ.get("RANK") == "1":
        raise ValueError("rank one failed on purpose")
    return x + 0


def data_address(t: torch.Tensor) -> torch.Tensor:
    """Where this proc's shard of `t` lives in memory."""
    return torch.tensor(t.data_ptr())


# ---- the documented module-level `@remote` pattern --------------------------------------------
from monarch import remote  # noqa: E402 - grouped with the functions that use it


@remote(propagate=lambda x: x)
def plus_one(x: torch.Tensor) -> torch.Tensor:
    """A decorated module-level remote function: the workers find the wrapper at this path."""
    return x + 1


@remote(propagate=lambda x: x)
def explode(x: torch.Tensor) -> torch.Tensor:
    """A decorated remote function that always raises."""
    raise ValueError("exploded on purpose")


@remote(propagate=lambda: None)
def rank_env() -> str:
    """A decorated remote function called with the actor adverbs: this proc's RANK."""
    import os

    return os.environ.get("RANK", "")


def _times_three(x: torch.Tensor) -> torch.Tensor:
    return x * 3


# A module-level Remote made from a string path.
times_three = remote("tests.tensor.remote_fns._times_three", propagate=lambda x: x)
