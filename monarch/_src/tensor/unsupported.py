"""Top-level names of Monarch's tensor engine that this version does not provide.

Each raises `NotImplementedError` with what to use instead, when used (not when imported).
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["function_resolvers", "grad_function", "grad_generator", "timer",
           "world_mesh"]

# Hooks that map remote-function paths to callables; this version resolves "module.function"
# paths by import only, and consults nothing here.
function_resolvers: list[Any] = []


def _missing(name: str, instead: str) -> NoReturn:
    raise NotImplementedError(f"monarch.{name} is not available in this version; {instead}")


def grad_generator(*args: Any, **kwargs: Any) -> NoReturn:
    """Not provided: call `loss.backward()` under `activate()`; autograd runs on the mesh."""
    _missing("grad_generator", "call loss.backward() under activate() instead.")


def grad_function(*args: Any, **kwargs: Any) -> NoReturn:
    """Not provided: call `loss.backward()` under `activate()`; autograd runs on the mesh."""
    _missing("grad_function", "call loss.backward() under activate() instead.")


def world_mesh(*args: Any, **kwargs: Any) -> NoReturn:
    """Not provided: the legacy supervisor mesh."""
    _missing("world_mesh", "use this_host().spawn_procs(...) and proc_mesh.activate().")


def timer(*args: Any, **kwargs: Any) -> NoReturn:
    """Not provided: Monarch's CUDA execution timer."""
    _missing("timer", "time work with remote functions that use torch.cuda.Event.")
