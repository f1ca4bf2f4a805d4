"""torchmonarch's `monarch._src.actor.actor_mesh`: actors, actor meshes, values and ports.

The names the `monarch.actor` facade exports are taken from it (importing it has its
import-time effects, as on Monarch); the three it does not export come from their home modules.
"""

from monarch._src.hosts.gateway import attach
from monarch._src.mesh.actor_mesh import ActorMesh
from monarch._src.mesh.context import Instance, client_context
from monarch._src.mesh.port import RankedPortReceiver
from monarch.actor import (
    Accumulator,
    Actor,
    ActorError,
    Channel,
    Context,
    Point,
    Port,
    PortReceiver,
    ValueMesh,
    as_endpoint,
    context,
    current_actor_name,
    current_rank,
    current_size,
    send,
)

# Monarch sets this inside Meta's packaged (PAR) binaries; this package never runs as one.
IN_PAR = False


# torchmonarch's name for the root client's context maker, which `context()` asks.
_client_context = client_context

__all__ = [
    "IN_PAR",
    "Accumulator",
    "Actor",
    "ActorError",
    "ActorMesh",
    "Channel",
    "Context",
    "Instance",
    "Point",
    "Port",
    "PortReceiver",
    "RankedPortReceiver",
    "ValueMesh",
    "as_endpoint",
    "attach",
    "context",
    "current_actor_name",
    "current_rank",
    "current_size",
    "send",
]
