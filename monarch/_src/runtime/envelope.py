"""The envelopes procs exchange: three typed records that are still plain tuples underneath.

Every envelope starts with its kind (`CALL`, `PORT` or `CONTROL`); `Call`, `PortMsg` and
`Control` name the fields that follow. They are `NamedTuple`s: reading `env.reply` costs what
`env[4]` does, and code that indexes still works.

On the wire they travel as plain tuples (`transport.comm.encode_batch` sends `tuple(env)`) and
the receiving mailbox turns each back into its record with `as_record` (one C-level tuple
construction, the fields themselves shared). Pickling a tuple subclass goes through
`__reduce_ex__` for every envelope: building, pickling and unpickling a batch of 100 CALLs took
204 us as records against 52 us as plain tuples, and 97 us the way it is done here (issue 15's
measurements, 2 shared cores).

Payloads are `(data, buffers)` pairs produced by `monarch._src.transport.serialization.dumps`,
with large buffers as `pickle.PickleBuffer`s so the transport sends them out of band; they are
decoded by whoever consumes them, in its own thread.

Port addresses are `(proc_address, port_id)` pairs; actor addresses are
`(proc_address, actor_key)` pairs.
"""

from __future__ import annotations

import pickle
from typing import Any, NamedTuple

from monarch._src.config import get as config_get
from monarch._src.supervision.errors import MessageTooLargeError
from monarch._src.transport import serialization

__all__ = [
    "CALL",
    "CONTROL",
    "PORT",
    "PORT_BATCH",
    "PORT_CLOSED",
    "PORT_ERROR",
    "PORT_VALUE",
    "Call",
    "CastRank",
    "Control",
    "Envelope",
    "Payload",
    "PortAddr",
    "PortMsg",
    "as_record",
    "copy_payload",
    "decode",
    "encode",
]

CALL = 0  # an endpoint call for an actor living in the receiving process (`Call`)
PORT = 1  # a value, error or close for a port of the receiving process (`PortMsg`)
CONTROL = 2  # an operation for the receiving process's agent itself (`Control`)

PORT_VALUE = 0  # the payload is a value
PORT_ERROR = 1  # the payload is an exception the receiver raises
PORT_CLOSED = 2  # the sender closed the port: no further values come
# The payload is a list of (rank, status, payload) replies gathered by a host's relay
# (`mesh/relay.py`); only a `GatherPort` is sent one.
PORT_BATCH = 3

PortAddr = tuple[str, int]
# (pickled data, out-of-band buffers): the buffers are a list, or the empty tuple when there are
# none (most payloads; unlike an empty list it is not an object the garbage collector tracks, on
# either side of the wire).
Payload = tuple[bytes, "list[Any] | tuple[()]"]
_NO_BUFFERS: tuple[()] = ()
# The receiver's position within the extent a call was cast to: (index, labels, sizes).
CastRank = tuple[int, tuple[str, ...], tuple[int, ...]]


class Call(NamedTuple):
    """`CALL`: run endpoint `method` of the actor `actor_key` living in the receiving process."""

    kind: int
    """Always `CALL`."""
    actor_key: str
    """The routing key of the target actor (its mesh's key) in the receiving process."""
    method: str
    """The endpoint's name."""
    payload: Payload
    """The encoded `(args, kwargs)`."""
    reply: PortAddr | None
    """Where the result goes (a `PORT` envelope), or None for a call nobody waits on."""
    cast_rank: CastRank
    """The receiver's `(index, labels, sizes)` within the extent the call was cast to."""
    sender: str | None
    """The sending actor's key (None for the root client): a call without `reply` that cannot
    be delivered bounces back to it (`Mailbox.on_undeliverable`)."""
    origin: int | None = None
    """The sending actor's telemetry id while the job records telemetry (the receiver's
    `messages.from_actor_id`), else None."""

    @property
    def rank(self) -> int:
        """The receiver's index within the cast (what a reply or error is tagged with)."""
        return self.cast_rank[0]


class PortMsg(NamedTuple):
    """`PORT`: a value, an error or the end of the stream for a port of the receiving process."""

    kind: int
    """Always `PORT`."""
    port_id: int
    """The port within the receiving process (the second half of a `PortAddr`)."""
    payload: Payload
    """The encoded value or exception (`encode(None)` for `PORT_CLOSED`)."""
    rank: int | None
    """The sender's rank within the mesh that answers (None outside a mesh)."""
    status: int
    """`PORT_VALUE`, `PORT_ERROR`, `PORT_CLOSED` or `PORT_BATCH`."""


class Control(NamedTuple):
    """`CONTROL`: a control operation for the receiving process's agent (its `Mailbox.control`).

    Built by `runtime.control.control(record, reply)` from the operation's typed record, whose
    class the receiver's table finds by `op` and rebuilds from `fields`."""

    kind: int
    """Always `CONTROL`."""
    op: str
    """The operation's wire name (`runtime.control.control_op`)."""
    fields: tuple[Any, ...]
    """The record's fields in order, as a plain tuple (plain picklable values)."""
    reply: PortAddr | None
    """Where the handler's answer or error goes, or None."""


Envelope = Call | PortMsg | Control

# Record class by kind, for `as_record`.
_RECORDS: tuple[type[Call], type[PortMsg], type[Control]] = (Call, PortMsg, Control)
_retype = tuple.__new__


def as_record(env: tuple[Any, ...]) -> Envelope:
    """The record of a plain envelope tuple received from the wire (fields are not copied)."""
    return _retype(_RECORDS[env[0]], env)


def encode(obj: Any) -> Payload:
    """Serialize `obj` for an envelope; raises the pickling error at the call site, and
    `MessageTooLargeError` (a SupervisionError and a ValueError) for a message over
    `codec_max_frame_length` (no receiver would accept it)."""
    data, buffers = serialization.dumps(obj)
    if buffers:
        size = serialization.frames_nbytes(data, buffers)
        limit = config_get("codec_max_frame_length")
        if size > limit:
            raise MessageTooLargeError(
                f"A message of {size} bytes is over codec_max_frame_length ({limit} bytes). "
                "Send it in parts, or raise the limit with "
                "monarch.configure(codec_max_frame_length=...)."
            )
    if not buffers:
        return data, _NO_BUFFERS
    return data, [
        b if isinstance(b, pickle.PickleBuffer) else pickle.PickleBuffer(b) for b in buffers
    ]


def decode(payload: Payload) -> Any:
    """The object `encode` serialized (in the consumer's thread)."""
    data, buffers = payload
    if not buffers:  # most calls and replies: no list of views to make
        return serialization.loads(data)
    return serialization.loads(data, [memoryview(b) for b in buffers])


def copy_payload(payload: Payload) -> Payload:
    """A payload that shares no memory with the sender (for delivery inside one process)."""
    data, buffers = payload
    if not buffers:
        return payload
    return data, [pickle.PickleBuffer(bytearray(memoryview(b))) for b in buffers]
