"""torchmonarch's `monarch._src.actor.actor_mesh`: actors, actor meshes, values and ports."""

import monarch.actor  # noqa: F401  (the facade's import-time effects, as on Monarch)
from monarch._src.mesh.accumulator import Accumulator
from monarch._src.mesh.actor import Actor
from monarch._src.mesh.actor_mesh import ActorMesh
from monarch._src.mesh.context import (
    Context,
    Instance,
    context,
    current_actor_name,
    current_rank,
    current_size,
)
from monarch._src.mesh.endpoint import as_endpoint, send
from monarch._src.mesh.port import Channel, Port, PortReceiver, RankedPortReceiver
from monarch._src.mesh.value_mesh import ValueMesh
from monarch._src.shape import Point
from monarch._src.supervision.errors import ActorError

__all__ = [
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
    "context",
    "current_actor_name",
    "current_rank",
    "current_size",
    "send",
]
