"""The messages a hosted actor's inbox holds besides `Call` envelopes, as typed records.

An actor's thread handles its inbox in order: endpoint calls (`runtime.envelope.Call`, kind
`CALL`, an int) and these records, whose kinds are strings, so the two never collide. Each is
a `NamedTuple` whose first field is its kind: `msg.kind` tells them apart, fields are read by
name. The proc agent (`mesh/agent.py`) and the actor itself (`mesh/hosted.py`) build them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from monarch._src.runtime.envelope import Call, PortAddr

if TYPE_CHECKING:
    from monarch._src.supervision.errors import MeshFailure

__all__ = [
    "CLEANUP",
    "INIT",
    "READY",
    "STOP",
    "SUPERVISE",
    "UNDELIVERABLE",
    "UPGRADE",
    "Cleanup",
    "InboxMessage",
    "Init",
    "Ready",
    "Stop",
    "Supervise",
    "Undeliverable",
    "Upgrade",
]

INIT = "init"
STOP = "stop"
SUPERVISE = "supervise"
READY = "ready"
UNDELIVERABLE = "undeliverable"
CLEANUP = "cleanup"
UPGRADE = "upgrade"


class Init(NamedTuple):
    """Run the actor's `__init__` (the first message of every actor)."""

    kind: str  # INIT


class Stop(NamedTuple):
    """Stop after the messages queued before this one (`__cleanup__` runs); answer `reply`."""

    kind: str  # STOP
    reason: str
    reply: PortAddr | None


class Supervise(NamedTuple):
    """A mesh this actor owns failed: run `__supervise__`."""

    kind: str  # SUPERVISE
    failure: MeshFailure


class Ready(NamedTuple):
    """Answer `reply` (tagged `rank`) once `__init__` ran, or with the actor's failure."""

    kind: str  # READY
    reply: PortAddr
    rank: int


class Undeliverable(NamedTuple):
    """A message this actor sent without a reply port could not be delivered."""

    kind: str  # UNDELIVERABLE
    message: Any  # a hosted.UndeliverableMessage


class Cleanup(NamedTuple):
    """The actor failed with `report`: run `__cleanup__` with an exception saying why."""

    kind: str  # CLEANUP
    report: str


class Upgrade(NamedTuple):
    """Swap the actor's class for the one encoded in `payload`, keeping its state
    (`ActorMesh.upgrade`); answer `reply`."""

    kind: str  # UPGRADE
    payload: Any  # the encoded new class
    reply: PortAddr


InboxMessage = Call | Init | Stop | Supervise | Ready | Undeliverable | Cleanup | Upgrade
