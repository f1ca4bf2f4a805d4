"""The schemes served by Dask's comm layer (`distributed.comm`): tls://, unix:// and inproc://.

Dask connects, listens and does its handshake (and TLS, when configured); then the connecting
end sends its hello. When the comm is a plain (not TLS) socket stream, both ends take the socket
over and carry batches on a `SocketChannel` (the listener acks once it took its end, and nothing
follows the ack on the comm): a unix socket ends up exactly like plain tcp. Otherwise batches
travel on the comm itself, because Dask's per-message `write` (a `sizeof` walk, msgpack, offload
checks) costs more than the rest of a call:
* other stream comms (tls) carry batches on the comm's tornado stream with `SocketChannel`'s
  framing (`StreamChannel`);
* comms without a stream (inproc, used by unit tests) carry each batch as one `Serialized`
  message (`CommChannel`).

Dask costs about 0.4 s to import (distributed, dask.config, numpy): it is imported (`dask()`) by
the first listen or connect on one of these schemes, never over plain tcp.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from monarch._src.config import duration_seconds
from monarch._src.transport import bufpool, tcp
from monarch._src.transport.channel import Channel, Listener, Local, Outgoing
from monarch._src.transport.socket_channel import (
    HEAD,
    SocketChannel,
    _frame_limit,
    check_header,
    gathered_buffers,
    split_body,
)

__all__ = ["Comm", "closed_errors", "connect", "listen", "listener", "open_channel", "preload",
           "take_socket"]

logger = logging.getLogger(__name__)


class Comm(Protocol):
    """The part of a `distributed.comm.core.Comm` this module uses, typed (Dask's is not)."""

    peer_address: str

    async def read(self) -> Any: ...

    async def write(self, msg: Any, on_error: str = "message") -> Any: ...

    def abort(self) -> None: ...

    def closed(self) -> bool: ...

    async def close(self) -> None: ...


# Dask's and tornado's "connection closed" errors, once Dask was imported (`comm.translate_error`).
closed_errors: tuple[type[BaseException], ...] = ()


def dask() -> Any:
    """`distributed.comm.core`, imported (with the `unix://` backend registered, and Dask's
    compression off) on first use."""
    global closed_errors
    from distributed.comm import core
    from tornado.iostream import StreamClosedError

    from monarch._src.transport import unix

    if not closed_errors:
        import dask.config

        dask.config.set({"distributed.comm.compression": None})
        unix.register()  # peers may listen on unix:// addresses
        closed_errors = (core.CommClosedError, StreamClosedError)
    return core


def preload() -> None:
    dask()


async def connect(addr: str, **kwargs: Any) -> Comm:
    """Dask's `connect` (untyped), with the type this module relies on."""
    comm: Comm = await dask().connect(addr, **kwargs)
    return comm


def listen(addr: str, handler: Callable[..., Any], **kwargs: Any) -> Any:
    """Dask's `listen`."""
    return dask().listen(addr, handler, **kwargs)


def _serialized(header: dict[str, Any], frames: list[Any]) -> Any:
    from distributed.protocol.serialize import Serialized

    return Serialized(header, frames)  # type: ignore[no-untyped-call]  # Dask ships it untyped


# Frames we send are never compressed: the payloads are mostly already-dense tensors, and a peer
# that reads with deserialize=False would not decompress them.
_NO_COMPRESSION = False


class _OnComm:
    """A channel over a Dask comm: awaited writes only (never `idle`, never `direct`)."""

    direct = False
    idle = False
    wlock: AbstractContextManager[Any] = nullcontext()

    def __init__(self, comm: Comm) -> None:
        self.comm = comm

    def write_now(self, frames: list[Any]) -> bool:
        raise RuntimeError(f"A {type(self).__name__} takes awaited writes only: use write().")

    async def drained(self) -> None:
        return  # every write is awaited to its end: nothing is ever left to drain

    def write_direct(self, frames: list[Any]) -> bool:
        return False  # never `direct`: the caller sends it the ordinary way

    def abort(self) -> None:
        self.comm.abort()

    async def close(self) -> None:
        if not self.comm.closed():
            await self.comm.close()


class StreamChannel(_OnComm):
    """Batches on the tornado stream of a tls comm, after Dask's handshake."""

    def __init__(self, comm: Comm) -> None:
        super().__init__(comm)
        self.stream = comm.stream  # type: ignore[attr-defined]  # stream comms only

    async def write(self, frames: list[Any]) -> None:
        bufs = gathered_buffers(frames)
        stream = self.stream
        if len(bufs) <= 3 and sum(b.nbytes for b in bufs) < 65536:
            await stream.write(b"".join(bufs))
            return
        for buf in bufs[:-1]:
            stream.write(buf)
        await stream.write(bufs[-1])

    async def read(self) -> list[Any]:
        head = bytearray(HEAD.size)
        await self.stream.read_into(head)
        total, n = HEAD.unpack(head)
        check_header(total, n, _frame_limit())
        body = bufpool.receive_buffer(total)
        await self.stream.read_into(body)
        return split_body(body, n)


class CommChannel(_OnComm):
    """Batches as Dask messages, for comms without a stream (inproc)."""

    async def write(self, frames: list[Any]) -> None:
        header = {"compression": (_NO_COMPRESSION,) * len(frames)}
        await self.comm.write({"b": _serialized(header, frames)}, on_error="raise")

    async def read(self) -> list[Any]:
        msg = await self.comm.read()
        frames: list[Any] = msg["b"].frames
        return frames


def _channel(comm: Comm) -> StreamChannel | CommChannel:
    if getattr(comm, "stream", None) is not None:
        return StreamChannel(comm)
    return CommChannel(comm)


def _can_take_socket(comm: Comm) -> bool:
    """A plain (not TLS) socket comm, whose socket a SocketChannel can drive."""
    from tornado.iostream import IOStream

    stream = getattr(comm, "stream", None)
    return type(stream) is IOStream and getattr(stream, "socket", None) is not None


def take_socket(comm: Comm) -> socket.socket:
    """Take the comm's connection over: a duplicate of its socket (tuned as `tcp.tune` says),
    the comm itself closed."""
    sock: socket.socket = comm.stream.socket.dup()  # type: ignore[attr-defined]  # stream only
    comm.abort()
    return tcp.tune(sock)


# ---- the backend: connecting and listening ------------------------------------------------------


async def open_channel(out: Outgoing, local: Local) -> Channel:
    """Connect to `out.addr` and say hello: a `SocketChannel` once the listener took a plain
    socket over, else a channel on the comm."""
    # As on plain tcp: a refused connect is retried for message_delivery_timeout.
    args = {"timeout": duration_seconds("message_delivery_timeout"), **local.conn_args}
    comm = await connect(out.addr, deserialize=False, **args)
    out.abort_opening = comm.abort
    raw = _can_take_socket(comm)
    await comm.write({"hello": local.address, "raw": raw, "incarnation": local.incarnation})
    if not raw:
        return _channel(comm)
    # The listener acks once it took its end over; nothing follows the ack on this comm.
    ack = await comm.read()
    local.heard_of(out.addr, str(ack.get("incarnation", "")))
    return SocketChannel(take_socket(comm), None, out.closed_under_us)


def listener(address: str, local: Local) -> Listener:
    """Dask's listener at `address`, each incoming comm served by `serve`."""

    async def handle(comm: Comm) -> None:
        await serve(local, comm)

    found: Listener = listen(address, handle, deserialize=False, **local.listen_args)
    return found


async def serve(local: Local, comm: Comm) -> None:
    """One incoming comm: its hello, then the socket taken over or batches read off the comm
    until it breaks."""
    local.track(comm)
    peer_addr = incarnation = ""
    serial = 0
    try:
        hello = await comm.read()
        peer_addr = hello["hello"]
        incarnation = str(hello.get("incarnation", ""))
        serial = local.hello(peer_addr, incarnation)
        if hello.get("raw") and _can_take_socket(comm):
            await comm.write({"ack": True, "incarnation": local.incarnation})
            local.adopt_socket(take_socket(comm), peer_addr, incarnation, serial)
            return
        channel = _channel(comm)
        while True:
            local.received(peer_addr, await channel.read())
    except Exception as exc:
        if not isinstance(exc, closed_errors):
            logger.exception("monarch: failed reading from %s", peer_addr or comm.peer_address)
        elif peer_addr:
            local.lost_incoming(peer_addr, incarnation, exc, serial)
    finally:
        local.untrack(comm)
        if not comm.closed():
            comm.abort()

