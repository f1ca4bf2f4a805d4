"""torchmonarch's `monarch._src.actor.host_mesh`: `HostMesh`, `this_host()`, `this_proc()`.

`_spawn_admin` (Monarch's HTTP mesh-admin agent) has no counterpart: the client's admin is the
JSON-lines control server behind `monarch top`/`monarch stacks` (`monarch._src.admin`), so it
raises with that pointer.
"""

from typing import Any

from monarch._src.mesh.host_mesh import HostMesh
from monarch._src.mesh.proc_mesh import this_proc
from monarch.actor import default_bootstrap_cmd, this_host

__all__ = ["HostMesh", "default_bootstrap_cmd", "this_host", "this_proc"]


def _spawn_admin(host_meshes: list[HostMesh], admin_addr: str | None = None,
                 telemetry_url: str | None = None) -> Any:
    raise NotImplementedError(
        "_spawn_admin() (Monarch's HTTP mesh-admin agent) does not exist here. The client's "
        "admin is its control server: run `monarch top` or `monarch stacks` against it."
    )
