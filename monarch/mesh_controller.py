"""Compatibility path for `RemoteException` and `spawn_tensor_engine` (torchmonarch's module)."""

from __future__ import annotations

from monarch._src.mesh.proc_mesh import ProcMesh
from monarch._src.tensor.errors import RemoteException
from monarch._src.tensor.mesh import DeviceMesh, device_mesh_of

__all__ = ["RemoteException", "spawn_tensor_engine"]


def spawn_tensor_engine(proc_mesh: ProcMesh) -> DeviceMesh:
    """The `DeviceMesh` of `proc_mesh` (its engine is created on first use)."""
    return device_mesh_of(proc_mesh)
