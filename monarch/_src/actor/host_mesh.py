"""torchmonarch's `monarch._src.actor.host_mesh`: `HostMesh`, `this_host()`, `this_proc()`."""

from monarch.actor import this_host
from monarch._src.mesh.host_mesh import HostMesh
from monarch._src.mesh.proc_mesh import this_proc

__all__ = ["HostMesh", "this_host", "this_proc"]
