"""torchmonarch's `monarch_hyperactor.proc_mesh`: `ProcMesh`, Monarch's Rust-side proc mesh.

On Monarch `monarch.actor.ProcMesh` wraps this Rust object (its `_proc_mesh`, a task that
resolves to it). Here the Python `ProcMesh` is the whole implementation; its `_proc_mesh`
resolves to a `NativeMesh` (`monarch._src.mesh.native`), this name, whose `region` is the
mesh's.
"""

from monarch._src.mesh.native import NativeMesh as ProcMesh

__all__ = ["ProcMesh"]
