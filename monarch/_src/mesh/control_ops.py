"""The mesh layer's control operations: one typed record per operation (`runtime/control.py`).

The proc agent (`agent.py`) handles the actor operations, the relay (`relay.py`) the cast
tree's, `controller.py` the controller registry's; each handler takes its record and reads the
fields by name. Senders build the records and post `control(record, reply)`. A field holds
plain picklable values: the envelope carries them as a plain tuple.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from monarch._src.runtime.control import control_op
from monarch._src.runtime.envelope import Payload, PortAddr

if TYPE_CHECKING:
    from monarch._src.mesh.spawn_info import SpawnInfo

__all__ = [
    "ActorReady",
    "Cancel",
    "GetOrSpawnController",
    "GetProcMesh",
    "Ping",
    "Relay",
    "RelayBounced",
    "RelayCast",
    "Spawn",
    "StopActor",
    "Supervise",
    "UpgradeActor",
    "UpgradeDecision",
]


# ---- the proc agent (agent.py) ------------------------------------------------------------
@control_op("spawn")
class Spawn(NamedTuple):
    """Start the actor `info` describes on the receiving proc, built from `payload`."""

    info: SpawnInfo
    payload: Payload
    """The encoded `(Class, args, kwargs)`."""


@control_op("actor_ready")
class ActorReady(NamedTuple):
    """Answer the reply port (tagged `rank`) once actor `key` here ran its `__init__`."""

    key: str
    rank: int


@control_op("stop_actor")
class StopActor(NamedTuple):
    """Stop actor `key` here after what it has queued; answer once it stopped."""

    key: str
    reason: str


@control_op("upgrade_actor")
class UpgradeActor(NamedTuple):
    """Phase one of an upgrade (`upgrade.py`): actor `key` here votes on its new class."""

    key: str
    payload: Payload
    """The encoded new class and its state hook's arguments."""


@control_op("upgrade_decision")
class UpgradeDecision(NamedTuple):
    """Phase two of an upgrade: actor `key` keeps its new class (`commit`) or rolls back."""

    key: str
    commit: bool


@control_op("supervise")
class Supervise(NamedTuple):
    """Rank `rank` of mesh `mesh_name` failed with `report`: tell its owner (this process's
    actor `owner_key`, or the root client when None)."""

    owner_key: str | None
    mesh_name: str
    mesh_key: str | None
    """The mesh's key in the ownership tree (None: not tracked there)."""
    rank: int
    report: str


@control_op("get_proc_mesh")
class GetProcMesh(NamedTuple):
    """Answer with the proc mesh `mesh_id` this process owns, once its procs are up."""

    mesh_id: str


@control_op("cancel")
class Cancel(NamedTuple):
    """Cancel the call to actor `key` here that answers `port` (it arrives after the call)."""

    key: str
    port: PortAddr


@control_op("ping")
class Ping(NamedTuple):
    """Answer None: the process is alive (heartbeats)."""


# ---- the cast tree (relay.py) ---------------------------------------------------------------
@control_op("relay")
class Relay(NamedTuple):
    """Hand envelopes on to procs of the relay's host."""

    gather: PortAddr | None
    """The caller's `GatherPort` the CALLs' replies are batched to, or None (their own)."""
    forwarded: list[tuple[str, tuple[Any, ...]]]
    """(address, envelope as a plain tuple) of each envelope."""


@control_op("relay_cast")
class RelayCast(NamedTuple):
    """Hand one CALL on to procs of the relay's host, each with its own rank."""

    gather: PortAddr | None
    call: tuple[Any, ...]
    """The CALL as a plain tuple, its rank to be replaced."""
    targets: list[tuple[str, int]]
    """(address, rank within the cast) of each target."""


@control_op("relay_bounced")
class RelayBounced(NamedTuple):
    """A broadcast `call` (a plain tuple) a relay could not deliver, back at its sender's
    process."""

    call: tuple[Any, ...]
    why: str


# ---- controllers (controller.py) ----------------------------------------------------------
@control_op("get_or_spawn_controller")
class GetOrSpawnController(NamedTuple):
    """Answer with the controller `name` of the root client, spawned from `payload` (the
    encoded `(Class, args, kwargs)`) the first time."""

    name: str
    payload: Payload
