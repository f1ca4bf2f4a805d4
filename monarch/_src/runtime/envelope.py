"""The envelopes procs exchange, as plain tuples (cheap to build and to pickle).

Every envelope starts with its kind. Payloads are `(data, buffers)` pairs produced by
`monarch._src.transport.serialization.dumps`, with large buffers as `pickle.PickleBuffer`s so the
transport sends them out of band; they are decoded by whoever consumes them, in its own thread.

Port addresses are `(proc_address, port_id)` pairs; actor addresses are
`(proc_address, actor_key)` pairs. A "cast rank" is `(index, labels, sizes)`: the receiver's
position within the extent the message was cast to.
"""

from __future__ import annotations

import pickle
from typing import Any

from monarch._src.config import get as config_get
from monarch._src.transport import serialization

__all__ = [
    "CALL",
    "CONTROL",
    "PORT",
    "PortAddr",
    "decode",
    "encode",
]

# (CALL, actor_key, method, payload, reply: PortAddr | None, cast_rank, sender)
# `sender` is the sending actor's key (None for the root client): a CALL with no reply port that
# cannot be delivered bounces back to it (`Mailbox.on_undeliverable`).
CALL = 0
# (PORT, port_id, payload, rank: int | None, status) -- status is one of the PORT_* below
PORT = 1
# (CONTROL, op, args: tuple, reply: PortAddr | None) -- handled by the proc agent itself
CONTROL = 2

PORT_VALUE = 0  # the payload is a value
PORT_ERROR = 1  # the payload is an exception the receiver raises
PORT_CLOSED = 2  # the sender closed the port: no further values come

PortAddr = tuple[str, int]
Payload = tuple[bytes, list[Any]]


def encode(obj: Any) -> Payload:
    """Serialize `obj` for an envelope; raises the pickling error at the call site, and
    `ValueError` for a message over `codec_max_frame_length` (no receiver would accept it)."""
    data, buffers = serialization.dumps(obj)
    if buffers:
        size = serialization.frames_nbytes(data, buffers)
        limit = config_get("codec_max_frame_length")
        if size > limit:
            raise ValueError(
                f"A message of {size} bytes is over codec_max_frame_length ({limit} bytes). "
                "Send it in parts, or raise the limit with "
                "monarch.configure(codec_max_frame_length=...)."
            )
    return data, [b if isinstance(b, pickle.PickleBuffer) else pickle.PickleBuffer(b) for b in buffers]


def decode(payload: Payload) -> Any:
    data, buffers = payload
    return serialization.loads(data, [memoryview(b) for b in buffers])


def copy_payload(payload: Payload) -> Payload:
    """A payload that shares no memory with the sender (for delivery inside one process)."""
    data, buffers = payload
    if not buffers:
        return payload
    return data, [pickle.PickleBuffer(bytearray(memoryview(b))) for b in buffers]
