"""Compatibility path for `RemoteException` and `spawn_tensor_engine` (torchmonarch's module)."""

from __future__ import annotations

from typing import Any

from monarch._src.tensor.errors import RemoteException

__all__ = ["RemoteException", "spawn_tensor_engine"]


def spawn_tensor_engine(proc_mesh: Any) -> Any:
    """The `DeviceMesh` of `proc_mesh` (its engine is created on first use)."""
    return proc_mesh._device_mesh()
