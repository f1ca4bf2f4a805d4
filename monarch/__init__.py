"""monarch: the Monarch single-controller programming model on Dask transport.

Actors live in `monarch.actor`; configuration in `monarch.config`. The names here (the tensor
engine: distributed tensors across a proc mesh, plus configuration and shape types) load
lazily on first access, so `import monarch` stays cheap and does not import torch.

`monarch.__version__` is the installed version (the `monarch-dask` distribution's), which
attaching to hosts compares with theirs. `no_mesh` is a device-mesh stand-in whose `activate()`
turns dispatch to the active mesh off for a block; `function_resolvers` is the (empty) list of hooks
torchmonarch uses to resolve remote functions by name. `monarch.Simulator` and `set_meta` come from
`monarch.simulator`.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> (module, attribute)
_LAZY: dict[str, tuple[str, str]] = {
    "configure": ("monarch._src.config", "configure"),
    "configured": ("monarch._src.config", "configured"),
    "get_global_config": ("monarch._src.config", "get_global_config"),
    "get_runtime_config": ("monarch._src.config", "get_runtime_config"),
    "clear_runtime_config": ("monarch._src.config", "clear_runtime_config"),
    "Extent": ("monarch._src.shape", "Extent"),
    "Shape": ("monarch._src.shape", "Shape"),
    "NDSlice": ("monarch._src.shape", "NDSlice"),
    "Selection": ("monarch._src.shape.selection", "Selection"),
    "Future": ("monarch._src.runtime.future", "Future"),
    "remote": ("monarch._src.tensor.remote", "remote"),
    "call_on_shard_and_fetch": ("monarch._src.tensor.remote", "call_on_shard_and_fetch"),
    "fetch_shard": ("monarch._src.tensor.fetch", "fetch_shard"),
    "inspect": ("monarch._src.tensor.fetch", "inspect"),
    "show": ("monarch._src.tensor.fetch", "show"),
    "Tensor": ("monarch._src.tensor.tensor", "Tensor"),
    "reduce": ("monarch._src.tensor.collectives", "reduce"),
    "reduce_": ("monarch._src.tensor.collectives", "reduce_"),
    "to_mesh": ("monarch._src.tensor.movement", "to_mesh"),
    "slice_mesh": ("monarch._src.tensor.movement", "slice_mesh"),
    "get_active_mesh": ("monarch._src.tensor.mesh", "get_active_mesh"),
    "no_mesh": ("monarch._src.tensor.mesh", "no_mesh"),
    "RemoteProcessGroup": ("monarch._src.tensor.remote", "RemoteProcessGroup"),
    "Stream": ("monarch._src.tensor.stream", "Stream"),
    "get_active_stream": ("monarch._src.tensor.stream", "get_active_stream"),
    "coalescing": ("monarch._src.tensor.stream", "coalescing"),
    "grad_generator": ("monarch._src.tensor.unsupported", "grad_generator"),
    "grad_function": ("monarch._src.tensor.unsupported", "grad_function"),
    "OpaqueRef": ("monarch._src.tensor.opaque", "OpaqueRef"),
    "function_resolvers": ("monarch._src.tensor.unsupported", "function_resolvers"),
    "builtins": ("monarch.builtins", ""),
    "world_mesh": ("monarch._src.tensor.unsupported", "world_mesh"),
    "timer": ("monarch._src.tensor.unsupported", "timer"),
    "Simulator": ("monarch.simulator", "Simulator"),
    "set_meta": ("monarch.simulator", "set_meta"),
    # the installed distribution's version; compared with attached hosts' (hosts/versions.py)
    "__version__": ("monarch._src.hosts.versions", "MONARCH_VERSION"),
}

__all__ = [
    "Extent",
    "Future",
    "NDSlice",
    "OpaqueRef",
    "RemoteProcessGroup",
    "Selection",
    "Shape",
    "Simulator",
    "Stream",
    "Tensor",
    "builtins",
    "call_on_shard_and_fetch",
    "clear_runtime_config",
    "coalescing",
    "configure",
    "configured",
    "fetch_shard",
    "function_resolvers",
    "get_active_mesh",
    "get_active_stream",
    "get_global_config",
    "get_runtime_config",
    "grad_function",
    "grad_generator",
    "inspect",
    "no_mesh",
    "reduce",
    "reduce_",
    "remote",
    "set_meta",
    "show",
    "slice_mesh",
    "timer",
    "to_mesh",
    "world_mesh",
]


def __getattr__(name: str) -> Any:
    """Load a top-level name on first access (PEP 562)."""
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'monarch' has no attribute {name!r}")
    module = importlib.import_module(target[0])
    value = getattr(module, target[1]) if target[1] else module
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
