"""torchmonarch's `monarch._src.actor.host_mesh`: `HostMesh`, `this_host()`, `this_proc()`.

`_spawn_admin(host_meshes, admin_addr=None, telemetry_url=None)` starts the client's mesh admin
HTTP API (`monarch._src.admin.spawn`) and returns a Future of `(admin_url, admin_ref)`.
"""

from monarch._src.admin.spawn import spawn_admin as _spawn_admin
from monarch._src.mesh.host_mesh import HostMesh
from monarch._src.mesh.proc_mesh import this_proc
from monarch.actor import default_bootstrap_cmd, this_host

__all__ = ["HostMesh", "_spawn_admin", "default_bootstrap_cmd", "this_host", "this_proc"]
