"""`PortForwarder`: TCP port forwarding between proc meshes, carried by monarch messages.

Spawn one `PortForwarder` actor (usually with `this_proc().spawn("fwd", PortForwarder)`) and
call `forward(dst_procs, dst_port, src_procs, "address:port")`: every proc of `src_procs`
listens on that address (procs of one host share it, SO_REUSEPORT); a connection accepted there
is relayed to `127.0.0.1:dst_port` as seen from the proc of `dst_procs` at the same mesh point.
Stopping the `PortForwarder` stops every forward it started (listeners closed, open connections
aborted).

How bytes travel: per forward, a `_Listener` actor on each source proc and a `_Dialer` actor on
each destination proc. For each accepted connection the listener asks its dialer to connect;
each side opens a `Channel` and hands the other its `Port`; then each side sends what it reads
from its socket as `("data", bytes)` messages, `("eof",)` when its reader ends (the other side
half-closes its writer) and `("abort",)` when its socket fails, reading or writing (the other
side drops its connection). Ports keep per-sender order, so the byte stream arrives in order.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from monarch._src.mesh.actor import Actor, endpoint
from monarch._src.mesh.context import current_rank
from monarch._src.mesh.port import Channel
from monarch._src.mesh.proc_mesh import ProcMesh
from monarch._src.shape import Point

__all__ = ["PortForwarder"]

_LOOPBACK = "127.0.0.1"
_CHUNK = 64 * 1024
# What a forward's ports carry: ("data", bytes), ("eof",) or ("abort",).
_Message = tuple[Any, ...]


def _check_port(what: str, port: Any) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"{what} must be an integer from 1 through 65535")
    return port


def _split_address(address: Any) -> tuple[str, int]:
    if not isinstance(address, str):
        raise ValueError("src_address must resolve to a string in 'address:port' form")
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        raise ValueError("src_address must use 'address:port' form")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        number = int(port)
    except ValueError:
        raise ValueError("src_address port must be an integer") from None
    return host, _check_port("src_address port", number)


def _at(value: Any, point: Point) -> Any:
    return value(point) if callable(value) else value


class _Relay:
    """The connections of one side of a forward: each pumps its socket to and from a port."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()

    def start(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, send: Any,
              receive: Any) -> None:
        task = asyncio.get_running_loop().create_task(self._run(reader, writer, send, receive))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   send: Any, receive: Any) -> None:
        # What the other side was last sent about this side's end: None, "eof" or "abort". An
        # "abort" may follow an "eof": a reset can read as an end of stream before a write
        # fails on it.
        told: str | None = None
        peer_eof = asyncio.get_running_loop().create_future()  # the other side's "eof" arrived

        def tell(kind: str) -> None:
            nonlocal told
            if told is None or (told == "eof" and kind == "abort"):
                told = kind
                send.send((kind,))

        async def outbound() -> None:
            try:
                while data := await reader.read(_CHUNK):
                    send.send(("data", data))
            except OSError:
                tell("abort")
                raise
            tell("eof")

        async def inbound() -> None:
            # Runs until cancelled: after the other side's "eof" only an "abort" can come.
            while True:
                kind, *rest = await receive.recv()
                if kind == "data":
                    writer.write(rest[0])
                    await writer.drain()
                elif kind == "eof":
                    if writer.can_write_eof():
                        writer.write_eof()
                    if not peer_eof.done():
                        peer_eof.set_result(None)
                else:  # "abort": the other side's connection failed
                    raise ConnectionAbortedError("the other end of the forward failed")

        out, inb = asyncio.ensure_future(outbound()), asyncio.ensure_future(inbound())
        try:
            # Done when both directions ended (this side's reader and the other side's), or as
            # soon as either fails.
            while True:
                await asyncio.wait([f for f in (out, inb, peer_eof) if not f.done()],
                                   return_when=asyncio.FIRST_COMPLETED)
                failed = any(t.done() and not t.cancelled() and t.exception() is not None
                             for t in (out, inb))
                if failed:
                    # A socket failed either way (a write to a client that reset, say): the
                    # other side drops its connection too.
                    tell("abort")
                    writer.transport.abort()
                    break
                if out.done() and peer_eof.done():
                    break
        except asyncio.CancelledError:
            try:
                tell("abort")
            except Exception:  # noqa: BLE001, S110 - the runtime may be going down
                pass
            writer.transport.abort()
            raise
        finally:
            for t in (out, inb):
                t.cancel()
            await asyncio.gather(out, inb, return_exceptions=True)
            writer.close()

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


class _Dialer(Actor):
    """On a destination proc: connects to the local service for each forwarded connection."""

    def __init__(self) -> None:
        self._port: int | None = None
        self._relay = _Relay()

    @endpoint
    async def configure(self, dst_port: Any) -> None:
        self._port = _check_port("dst_port", _at(dst_port, current_rank()))

    @endpoint
    async def connect(self, to_listener: Any) -> Any:
        assert self._port is not None, "configure() comes first"
        reader, writer = await asyncio.open_connection(_LOOPBACK, self._port)
        to_me, receive = Channel[_Message].open()
        self._relay.start(reader, writer, to_listener, receive)
        return to_me

    async def __cleanup__(self, exc: BaseException | None) -> None:
        await self._relay.close()


class _Listener(Actor):
    """On a source proc: accepts connections and relays each through its dialer."""

    def __init__(self) -> None:
        self._dialer: Any = None
        self._server: asyncio.AbstractServer | None = None
        self._relay = _Relay()

    @endpoint
    async def listen(self, dialers: Any, src_address: Any) -> None:
        point = current_rank()
        self._dialer = dialers.slice(**dict(point)) if len(point.extent) else dialers
        host, port = _split_address(_at(src_address, point))
        # reuse_port: the procs of one host may all listen at the same source address (the
        # kernel spreads the connections among them).
        self._server = await asyncio.start_server(self._accepted, host, port, reuse_address=True,
                                                  reuse_port=True)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            to_me, receive = Channel[_Message].open()
            to_dialer = await self._dialer.connect.call_one(to_me)
        except Exception:  # noqa: BLE001 - the service cannot be reached: drop the client
            writer.transport.abort()
            return
        self._relay.start(reader, writer, to_dialer, receive)

    async def __cleanup__(self, exc: BaseException | None) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        await self._relay.close()


class PortForwarder(Actor):
    """An actor that owns TCP port forwards between proc meshes; stop it to end them all."""

    @endpoint
    async def forward(
        self,
        dst_proc_mesh: ProcMesh,
        dst_port: int | Callable[[Point], int],
        src_proc_mesh: ProcMesh,
        src_address: str | Callable[[Point], str],
    ) -> None:
        """Forward `src_address` ("address:port", on each source proc) to `127.0.0.1:dst_port`
        on the destination proc at the same point. Both meshes must have the same extent;
        `dst_port` and `src_address` may be functions of the point. Returns once every source
        proc listens."""
        if dst_proc_mesh.extent != src_proc_mesh.extent:
            raise ValueError(
                "destination and source process meshes must have the same shape: "
                f"{dst_proc_mesh.extent} != {src_proc_mesh.extent}"
            )
        if not callable(dst_port):
            _check_port("dst_port", dst_port)
        if not callable(src_address):
            _split_address(src_address)
        tag = uuid.uuid4().hex[:12]
        dialers = dst_proc_mesh.spawn(f"port_forward_dialer_{tag}", _Dialer)
        listeners = None
        try:
            await dialers.configure.call(dst_port)
            listeners = src_proc_mesh.spawn(f"port_forward_listener_{tag}", _Listener)
            await listeners.listen.call(dialers, src_address)
        except Exception:
            stops = [m.stop() for m in (listeners, dialers) if m is not None]
            for stop in stops:
                try:
                    await stop
                except Exception:  # noqa: BLE001, S110 - the setup error is what matters
                    pass
            raise
