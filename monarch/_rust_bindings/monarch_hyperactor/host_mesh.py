"""torchmonarch's `monarch_hyperactor.host_mesh`: `BootstrapCommand` and the Rust-side `HostMesh`.

`BootstrapCommand` is the command a host starts a proc with (`spawn_procs(bootstrap_command=)`,
`monarch._src.hosts.bootstrap_command`). On Monarch `HostMesh` is the Rust host mesh that
`monarch.actor.HostMesh._hy_host_mesh` resolves to; here that is a `NativeMesh`
(`monarch._src.mesh.native`), this name.
"""

from monarch._src.hosts.bootstrap_command import BootstrapCommand
from monarch._src.mesh.native import NativeMesh as HostMesh

__all__ = ["BootstrapCommand", "HostMesh"]
