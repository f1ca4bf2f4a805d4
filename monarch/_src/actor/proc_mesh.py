"""torchmonarch's `monarch._src.actor.proc_mesh`: `ProcMesh` and controllers.

`HyProcMesh` is the Rust-side mesh name (`monarch._rust_bindings...proc_mesh.ProcMesh`), which
has no counterpart here. Spawn callbacks are not offered: registering one raises, rather than
accept a callback that would never be called.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import monarch.actor  # noqa: F401  (the facade's import-time effects, as on Monarch)
from monarch._rust_bindings.monarch_hyperactor.proc_mesh import ProcMesh as HyProcMesh
from monarch._src.mesh.controller import get_or_spawn_controller
from monarch._src.mesh.proc_mesh import ProcMesh

if TYPE_CHECKING:
    # At run time `__getattr__` below imports it on first use.
    from monarch._src.tensor.mesh import DeviceMesh

__all__ = [
    "DeviceMesh",
    "HyProcMesh",
    "ProcMesh",
    "get_or_spawn_controller",
    "register_proc_mesh_spawn_callback",
    "unregister_proc_mesh_spawn_callback",
]


def __getattr__(name: str) -> Any:
    # DeviceMesh lives in the tensor engine, which imports torch: only on demand.
    if name == "DeviceMesh":
        from monarch._src.tensor.mesh import DeviceMesh

        return DeviceMesh
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_NO_CALLBACKS = (
    "Proc-mesh spawn callbacks are not supported here. Call your hook on the mesh that "
    "spawn_procs() returns instead."
)


def register_proc_mesh_spawn_callback(callback: Callable[[ProcMesh], None]) -> None:
    raise NotImplementedError(_NO_CALLBACKS)


def unregister_proc_mesh_spawn_callback(callback: Callable[[ProcMesh], None]) -> None:
    raise NotImplementedError(_NO_CALLBACKS)
