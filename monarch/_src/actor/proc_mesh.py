"""torchmonarch's `monarch._src.actor.proc_mesh`: `ProcMesh` and controllers."""

import monarch.actor  # noqa: F401  (the facade's import-time effects, as on Monarch)
from monarch._src.mesh.controller import get_or_spawn_controller
from monarch._src.mesh.proc_mesh import ProcMesh

__all__ = ["ProcMesh", "get_or_spawn_controller"]
