"""`DeviceMesh`, `no_mesh` and `get_active_mesh` (as `monarch` exports them)."""

from monarch._src.tensor.mesh import DeviceMesh, get_active_mesh, no_mesh

__all__ = ["DeviceMesh", "get_active_mesh", "no_mesh"]
