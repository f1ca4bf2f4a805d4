"""torchmonarch's `monarch_hyperactor.mailbox`: port ids, port references, receivers.

`PortId` and `PortRef` are values here (an actor address and a port index). Messages travel as
this package's envelopes, not as `PythonMessage`s, so posting a `PythonMessage` through a
`PortRef` or a `Mailbox` is refused with a pointer to the public ports (`monarch.actor.Port`,
`Channel.open()`), which are the working equivalent. `PortReceiver` is `monarch.actor`'s, and
`UndeliverableMessageEnvelope` is what `Actor._handle_undeliverable_message` receives here.
"""

from __future__ import annotations

from typing import Any

from monarch._rust_bindings.monarch_hyperactor.proc import ActorAddr, location_of
from monarch._src.mesh.hosted import UndeliverableMessage
from monarch._src.mesh.port import PortReceiver

__all__ = ["Mailbox", "PortId", "PortReceiver", "PortRef", "UndeliverableMessageEnvelope"]

UndeliverableMessageEnvelope = UndeliverableMessage

_USE_PORTS = (
    "Messages here are monarch's own envelopes; use monarch.actor.Port (an endpoint's port "
    "argument) or monarch.actor.Channel.open() to send values to a port."
)


class PortId:
    """The id of one port: the actor it belongs to and the port's index there."""

    __slots__ = ("_actor_id", "_port")

    def __init__(self, *, actor_id: ActorAddr, port: int) -> None:
        self._actor_id = actor_id
        self._port = port

    @property
    def actor_id(self) -> ActorAddr:
        return self._actor_id

    @property
    def index(self) -> int:
        return self._port

    @staticmethod
    def from_string(port_id_str: str) -> PortId:
        """Parse the `actor.proc:index@scheme://address` form `repr()` prints."""
        ids, sep, location = port_id_str.partition("@")
        actor, colon, index = ids.rpartition(":")
        if not sep or not colon or not index.isdigit():
            raise ValueError(
                f"Invalid port id {port_id_str!r}. Expected the form "
                "'actor.proc:index@scheme://address'."
            )
        return PortId(actor_id=ActorAddr.from_string(f"{actor}@{location}"), port=int(index))

    def __repr__(self) -> str:
        actor = self._actor_id
        return f"{actor.actor_name}.{actor.proc_name}:{self._port}@{location_of(actor.addr)}"

    def __hash__(self) -> int:
        return hash((self._actor_id, self._port))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, PortId)
            and self._actor_id == other._actor_id
            and self._port == other._port
        )

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (PortId.from_string, (repr(self),))


class PortRef:
    """A reference to a port by its id."""

    __slots__ = ("_port_id", "return_undeliverable")

    def __init__(self, port_id: PortId) -> None:
        self._port_id = port_id
        self.return_undeliverable = True  # whether a failed send is reported to the sender

    @property
    def port_id(self) -> PortId:
        return self._port_id

    def send(self, instance: Any, message: Any) -> None:
        raise NotImplementedError(
            f"PortRef.send() to {self._port_id!r} is not supported. {_USE_PORTS}"
        )

    def __repr__(self) -> str:
        return f"PortRef({self._port_id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PortRef) and self._port_id == other._port_id

    def __hash__(self) -> int:
        return hash(self._port_id)


class Mailbox:
    """Monarch's per-actor Rust mailbox. Here each process has one mailbox inside the runtime
    and it is not a user object."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"Mailbox cannot be constructed. {_USE_PORTS}")
