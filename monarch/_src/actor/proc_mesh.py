"""torchmonarch's `monarch._src.actor.proc_mesh`: `ProcMesh` and controllers.

`HyProcMesh` is the Rust-side mesh name (`monarch._rust_bindings...proc_mesh.ProcMesh`), which
has no counterpart here. A registered spawn callback is called with each proc mesh
`HostMesh.spawn_procs` makes, before it is returned. `get_active_proc_meshes()`: the proc meshes
this process spawned and has not stopped.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import monarch._src.actor.logging  # fills the slot behind ProcMesh._logging_manager
import monarch.actor  # noqa: F401  (the facade's import-time effects, as on Monarch)
from monarch._rust_bindings.monarch_hyperactor.proc_mesh import ProcMesh as HyProcMesh
from monarch._src.mesh.controller import get_or_spawn_controller
from monarch._src.mesh.host_mesh import PROC_MESH_SPAWN_CALLBACKS
from monarch._src.mesh.proc_mesh import ProcMesh, active_proc_meshes

if TYPE_CHECKING:
    # At run time `__getattr__` below imports it on first use.
    from monarch._src.tensor.mesh import DeviceMesh

__all__ = [
    "DeviceMesh",
    "HyProcMesh",
    "ProcMesh",
    "get_active_proc_meshes",
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


def register_proc_mesh_spawn_callback(callback: Callable[[ProcMesh], None]) -> None:
    """Call `callback(proc_mesh)` with every proc mesh spawned from now on (in this process),
    before `spawn_procs` returns it; an exception it raises fails that `spawn_procs`."""
    if not callable(callback):
        raise TypeError(
            f"register_proc_mesh_spawn_callback takes a callable of one ProcMesh, got "
            f"{type(callback).__name__}."
        )
    PROC_MESH_SPAWN_CALLBACKS.append(callback)


def unregister_proc_mesh_spawn_callback(callback: Callable[[ProcMesh], None]) -> None:
    """Stop calling `callback`; ValueError when it is not registered."""
    try:
        PROC_MESH_SPAWN_CALLBACKS.remove(callback)
    except ValueError:
        raise ValueError(
            f"unregister_proc_mesh_spawn_callback: {callback!r} is not registered (register it "
            "with register_proc_mesh_spawn_callback first)."
        ) from None


def get_active_proc_meshes() -> list[ProcMesh]:
    """The proc meshes this process spawned and has not stopped (what
    `flush_all_proc_mesh_logs` flushes)."""
    return active_proc_meshes()
