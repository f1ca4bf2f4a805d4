"""Ordered, batched streams between procs over `distributed.comm`.

Each proc listens on one `distributed.comm` address and keeps one persistent outgoing comm per
peer address. Everything a proc sends to a peer goes through that peer's `_Peer`: envelopes queue
in order and a single writer task sends whatever accumulated while the previous write was in
flight as one batch. One writer per peer gives per-(sender proc, receiver proc) FIFO, which is
what Monarch's per-(sender actor, receiver actor) ordering needs.

A batch is a list of frames: frame 0 is the pickled list of envelopes, the rest are the
out-of-band buffers of the payloads inside it, so large arrays and tensors are never copied into
a msgpack frame. Plain `tcp://` is listened on and connected by `tcp.py` (asyncio sockets, Dask's
handshake format, no Dask import); `distributed.comm` connects, listens and does its handshake
(and TLS, when configured) for every other scheme. Then, because Dask's per-message `write` (a
`sizeof` walk, msgpack, offload checks) costs more than the rest of a call:
* plain tcp connections run on a `SocketChannel` (one `sendmsg` per batch, batches cut from one
  `recv_into`) after a hello/ack exchange that guarantees no bytes are left buffered (a tcp comm
  from Dask, at the other end, hands its socket over);
* other stream comms (tls) carry batches on the comm's tornado stream with the same framing
  (`_StreamChannel`);
* comms without a stream (inproc, used by unit tests) carry each batch as one `Serialized`
  message (`_CommChannel`).

Rejected alternatives (see PERFORMANCE.md): Dask's pooled rpc (one comm per call in flight, a
handshake per connection reuse) and Dask actors (calls routed through the scheduler) are 10-100x
slower than one persistent comm per peer.

Only this package imports `distributed`. Every error it raises is translated by `translate_error`
into a monarch error, at this boundary.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import secrets
import socket
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from monarch._src.config import duration_seconds, get as config_get
from monarch._src.supervision.errors import TransportError
from monarch._src.transport import bufpool, tcp
from monarch._src.transport.socket_channel import (
    HEAD,
    SocketChannel,
    _frame_limit,
    check_header,
    frame_buffers,
    split_body,
)
from monarch._src.transport.tls import listen_scheme, tls_args, tls_enabled

__all__ = ["Transport", "preload", "translate_error"]

logger = logging.getLogger(__name__)

# Envelopes are opaque to the transport: any picklable tuple whose payloads keep their large
# buffers as `pickle.PickleBuffer`s. A tuple subclass (the runtime's typed records) arrives as a
# plain tuple: pickling a subclass costs a `__reduce_ex__` call per envelope.
Envelope = Any
BatchHandler = Callable[[str, list[Envelope]], None]
LostHandler = Callable[[str, list[Envelope], BaseException], None]



class Comm(Protocol):
    """The part of a `distributed.comm.core.Comm` this module uses, typed (Dask's is not)."""

    peer_address: str

    async def read(self) -> Any: ...

    async def write(self, msg: Any, on_error: str = "message") -> Any: ...

    def abort(self) -> None: ...

    def closed(self) -> bool: ...

    async def close(self) -> None: ...


# Dask's comm layer costs about 0.4 s to import (distributed, dask.config, numpy), so it is
# imported (`_dask`) by the first listen or connect on a tls, unix or inproc address: never over
# plain tcp.
_closed_errors: tuple[type[BaseException], ...] = ()  # Dask's and tornado's "connection closed"


def preload() -> None:
    """Import now what a proc's transport will need (a fork server does, so that its children
    need not): Dask's comm layer, unless procs listen on plain tcp, which does without it."""
    try:
        address = default_listen_address()
    except ValueError:  # a transport the procs will refuse when they start: nothing to load
        return
    if _plain_tcp(address):
        tcp.preload()
    else:
        _dask()


def _dask() -> Any:
    """`distributed.comm.core`, imported (with the `unix://` backend registered, and Dask's
    compression off) on first use: only tls://, unix:// and inproc:// addresses need it."""
    global _closed_errors
    from distributed.comm import core
    from tornado.iostream import StreamClosedError

    from monarch._src.transport import unix

    if not _closed_errors:
        import dask.config

        dask.config.set({"distributed.comm.compression": None})
        unix.register()  # peers may listen on unix:// addresses
        _closed_errors = (core.CommClosedError, StreamClosedError)
    return core


def _plain_tcp(addr: str) -> bool:
    """Whether `addr` is served by `tcp.py` (a plain tcp address) rather than Dask's comm."""
    return addr.startswith(tcp.PREFIX)


async def connect(addr: str, **kwargs: Any) -> Comm:
    """Dask's `connect` (untyped), with the type this module relies on."""
    comm: Comm = await _dask().connect(addr, **kwargs)
    return comm


def listen(addr: str, handler: Callable[..., Any], **kwargs: Any) -> Any:
    """Dask's `listen`."""
    return _dask().listen(addr, handler, **kwargs)


def _serialized(header: dict[str, Any], frames: list[Any]) -> Any:
    from distributed.protocol.serialize import Serialized

    return Serialized(header, frames)  # type: ignore[no-untyped-call]  # Dask ships it untyped

# Frames we send are never compressed: the payloads are mostly already-dense tensors, and a peer
# that reads with deserialize=False would not decompress them.
_NO_COMPRESSION = False


def translate_error(exc: BaseException, addr: str) -> TransportError:
    """The one place where Dask and OS errors become monarch errors."""
    if isinstance(exc, TransportError):
        return exc
    detail = f": {exc}" if str(exc) else ""
    if _closed_errors and isinstance(exc, _closed_errors):
        return TransportError(f"The connection to {addr} was closed{detail}.")
    if isinstance(exc, (OSError, asyncio.TimeoutError)):
        return TransportError(f"Could not reach {addr}{detail}.")
    return TransportError(f"The transport to {addr} failed: {type(exc).__name__}{detail}.")


def encode_batch(envelopes: Sequence[Envelope]) -> list[Any]:
    """Frames of a batch: the pickled envelopes (as plain tuples), then their out-of-band
    buffers."""
    buffers: list[pickle.PickleBuffer] = []
    main = pickle.dumps([tuple(env) for env in envelopes], protocol=5,
                        buffer_callback=buffers.append)
    return [main, *(b.raw() for b in buffers)]


def decode_batch(frames: Sequence[Any]) -> list[Envelope]:
    envelopes: list[Envelope] = pickle.loads(frames[0], buffers=frames[1:])
    return envelopes


class _StreamChannel:
    """Batches on the tornado stream of a tcp/tls comm, after Dask's handshake."""

    def __init__(self, comm: Comm) -> None:
        self.comm = comm
        self.stream = comm.stream  # type: ignore[attr-defined]  # tcp and tls comms only

    async def write(self, frames: list[Any]) -> None:
        bufs = frame_buffers(frames)
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


class _CommChannel:
    """Batches as Dask messages, for comms without a stream (inproc)."""

    def __init__(self, comm: Comm) -> None:
        self.comm = comm

    async def write(self, frames: list[Any]) -> None:
        header = {"compression": (_NO_COMPRESSION,) * len(frames)}
        await self.comm.write({"b": _serialized(header, frames)}, on_error="raise")

    async def read(self) -> list[Any]:
        msg = await self.comm.read()
        frames: list[Any] = msg["b"].frames
        return frames


def _can_take_socket(comm: Comm) -> bool:
    """A plain (not TLS) tcp comm, whose socket a SocketChannel can drive."""
    from tornado.iostream import IOStream

    stream = getattr(comm, "stream", None)
    return type(stream) is IOStream and getattr(stream, "socket", None) is not None


def _take_socket(comm: Comm) -> socket.socket:
    """Take the comm's connection over: a duplicate of its socket (tuned as `tcp.tune` says),
    the comm itself closed."""
    sock: socket.socket = comm.stream.socket.dup()  # type: ignore[attr-defined]  # tcp only
    comm.abort()
    return tcp.tune(sock)


def default_listen_address() -> str:
    """Where a proc listens when not told: a fresh unix socket under the `Unix` transport (or a
    'unix://' client address), else loopback (tcp, or tls when TLS is on)."""
    transport = config_get("default_transport")
    unix_address = isinstance(transport, str) and transport.startswith("unix://")
    if getattr(transport, "value", None) == "unix" or unix_address:
        if tls_enabled():
            raise ValueError(
                "default_transport is Unix but TLS is on (enable_tls): unix-domain sockets are "
                "not encrypted. Use the Tls transport, or turn enable_tls off."
            )
        from monarch._src.transport import unix

        return unix.default_listen_address()
    return f"{listen_scheme()}://127.0.0.1:0"


def _channel(comm: Comm) -> _StreamChannel | _CommChannel:
    if getattr(comm, "stream", None) is not None:
        return _StreamChannel(comm)
    return _CommChannel(comm)


def _call_all(callbacks: list[Callable[[], None]]) -> None:
    for callback in callbacks:
        callback()


class _Peer:
    """The outgoing half of a connection to one peer address (runtime loop only)."""

    def __init__(self, transport: Transport, addr: str) -> None:
        self.transport = transport
        self.addr = addr
        self.queue: list[Envelope] = []  # envelopes waiting for the writer, in send order
        self.written: list[Callable[[], None]] = []  # to call once `queue` was written
        self.comm: Comm | None = None  # None until connected
        self.channel: SocketChannel | _StreamChannel | _CommChannel | None = None  # once connected
        self.task: asyncio.Task[None] | None = None  # the writer, while it runs
        self.failed: BaseException | None = None  # set once; a failed peer delivers nothing
        # Whether a batch came from this peer since the last `send_direct` to it. A direct write
        # saves a thread hop when a caller waits for each answer; while earlier sends are still
        # unanswered, calls go through the loop, which writes them in batches.
        self.heard = True

    def send(self, env: Envelope, written: Callable[[], None] | None = None) -> None:
        if self.failed is not None:
            self.transport._on_lost(self.addr, [env], self.failed)
            if written is not None:
                written()
            return
        self.queue.append(env)
        if written is not None:
            self.written.append(written)
        if self.task is not None:
            return  # the writer takes it with the next batch
        if isinstance(self.channel, SocketChannel) and self.channel.idle:
            self.transport._mark_dirty(self)  # written synchronously at the end of this turn
        else:
            self.task = asyncio.get_running_loop().create_task(self._write())

    def send_direct(self, env: Envelope) -> bool:
        """Write `env` now from the calling thread (not the loop's), when nothing sent to this
        peer before is still waiting: True if it was committed to the socket, False if it must
        go the ordinary way (through the loop)."""
        channel = self.channel
        if type(channel) is not SocketChannel or self.failed is not None or not self.heard:
            return False
        with channel.wlock:
            if self.queue or self.task is not None or not channel.idle:
                return False
            self.heard = False
            return channel.write_direct(encode_batch((env,)))

    def write_now(self) -> None:
        """Write what is queued without a task, when the socket takes it (loop only)."""
        if self.task is not None or not self.queue or self.failed is not None:
            return
        channel = self.channel
        if not (isinstance(channel, SocketChannel) and channel.idle):
            self.task = asyncio.get_running_loop().create_task(self._write())
            return
        try:
            with channel.wlock:  # the batch is taken and written as one step (`send_direct`)
                batch, self.queue = self.queue, []
                notify, self.written = self.written, []
                done = channel.write_now(encode_batch(batch))
        except BaseException as exc:
            # Reported from a task: write_now runs inside the mailbox's routing.
            self.task = asyncio.get_running_loop().create_task(self._fail_soon(exc, batch, notify))
            return
        if done:
            _call_all(notify)
        else:
            self.task = asyncio.get_running_loop().create_task(self._finish(notify))

    async def _finish(self, notify: list[Callable[[], None]]) -> None:
        """Wait until a batch written in part was sent, then go on with what queued since."""
        try:
            assert isinstance(self.channel, SocketChannel)
            await self.channel.drained()
        except BaseException as exc:
            self.task = None
            self._fail(exc, [], notify)
            return
        _call_all(notify)
        self.task = None
        if self.queue:
            self.task = asyncio.get_running_loop().create_task(self._write())

    def _fail(self, exc: BaseException, batch: list[Envelope],
              notify: list[Callable[[], None]]) -> None:
        """The one failure path of this peer: whatever broke (a write, a drain, the connection
        while idle), the peer is failed for good, `batch` (taken by the writer) and everything
        still queued are reported lost, in send order, and every written-callback is called."""
        err = translate_error(exc, self.addr)
        if err is not exc:
            err.__cause__ = exc
        self.failed = err
        lost, self.queue = batch + self.queue, []
        callbacks, self.written = notify + self.written, []
        _call_all(callbacks)
        self.transport._peer_failed(self, lost, err)

    async def _fail_soon(self, exc: BaseException, batch: list[Envelope],
                         notify: list[Callable[[], None]]) -> None:
        self.task = None
        self._fail(exc, batch, notify)

    async def _write(self) -> None:
        batch: list[Envelope] = []  # the batch being written; lost with the rest on failure
        notify: list[Callable[[], None]] = []  # its written-callbacks
        try:
            if self.channel is None:
                self.channel = await self._connect()
            while self.queue:
                batch, self.queue = self.queue, []
                notify, self.written = self.written, []
                await self.channel.write(encode_batch(batch))
                _call_all(notify)
                notify = []
        except BaseException as exc:
            self._fail(exc, batch, notify)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.task = None

    async def _connect(self) -> SocketChannel | _StreamChannel | _CommChannel:
        transport = self.transport
        if _plain_tcp(self.addr):
            sock, incarnation = await tcp.connect(self.addr, transport.address,
                                                  transport.conn_args, transport.incarnation)
            transport._heard_of(self.addr, incarnation)
            return SocketChannel(sock, None, self._closed_under_us)
        # As on plain tcp: a refused connect is retried for message_delivery_timeout.
        args = {"timeout": duration_seconds("message_delivery_timeout"), **self.transport.conn_args}
        comm = self.comm = await connect(self.addr, deserialize=False, **args)
        raw = _can_take_socket(comm)
        await comm.write({"hello": transport.address, "raw": raw,
                          "incarnation": transport.incarnation})
        if not raw:
            return _channel(comm)
        # The listener acks once it took its end over; nothing follows the ack on this comm.
        ack = await comm.read()
        transport._heard_of(self.addr, str(ack.get("incarnation", "")))
        return SocketChannel(_take_socket(comm), None, self._closed_under_us)

    def _closed_under_us(self, exc: BaseException) -> None:
        """The connection broke while idle (the peer exited): fail now, not at the next write."""
        if (
            self.failed is None
            and self.task is None
            and self.transport._peers.get(self.addr) is self
        ):
            self._fail(exc, [], [])

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        if isinstance(self.channel, SocketChannel):
            self.channel.abort()
        elif self.comm is not None and not self.comm.closed():
            await self.comm.close()


class Transport:
    """The listener and the outgoing peers of one proc.

    `on_batch(peer_addr, envelopes)` is called on the loop for each received batch;
    `on_lost(peer_addr, envelopes, error)` for envelopes that could not be delivered and once for
    a connection that broke (with an empty list), so the runtime can fail what waited on that peer.

    Each transport has a random `incarnation`, which both ends of a connection tell each other
    in its opening exchange: `incarnations` maps each peer address to the one last heard there,
    and `on_hello(addr, incarnation)` is called on the loop each time one is heard. A process
    that listens where another one did before (the OS reuses ports) has another incarnation, so
    what was known of the old one need not apply to it; a connection of the old one that breaks
    after the new one was heard is not reported.
    """

    def __init__(
        self,
        on_batch: BatchHandler,
        on_lost: LostHandler,
        conn_args: dict[str, Any] | None = None,
    ) -> None:
        self._on_batch = on_batch
        self._on_lost = on_lost
        # Without explicit arguments, TLS follows the configuration (see tls.py).
        secure = tls_args() if conn_args is None else None
        self.conn_args = conn_args if conn_args is not None else (secure[0] if secure else {})
        self.listen_args = secure[1] if secure else dict(self.conn_args)
        self.address = ""  # the bound listen address, once started
        self.incarnation = secrets.token_hex(8)
        self.incarnations: dict[str, str] = {}  # peer address -> the incarnation heard last
        self.on_hello: Callable[[str, str], None] | None = None
        self._listener: Any = None
        self._peers: dict[str, _Peer] = {}
        self._incoming: set[Comm] = set()
        self._raw_incoming: set[SocketChannel] = set()
        # Peer address -> the serial of its newest incoming connection (`_lost_incoming`).
        self._latest_incoming: dict[str, int] = {}
        # Peer address -> the newest incoming serial when this transport gave that peer up
        # (`forget_peer`): the breaks of those connections are no news (`_lost_incoming`).
        self._abandoned: dict[str, int] = {}
        self._incoming_serial = 0
        self._dirty: list[_Peer] = []  # peers with batches to write at the end of this turn
        self._closing = False

    async def start(self, address: str | None = None) -> str:
        """Listen on `address` (default: loopback, tcp or tls as configured). Plain tcp is served
        by `tcp.Listener`, every other scheme by Dask's comm layer."""
        if address is None:
            address = default_listen_address()
        if _plain_tcp(address):
            self._listener = tcp.Listener(address, self._handle_socket, self.listen_args,
                                          self.incarnation)
        else:
            self._listener = listen(address, self._handle_comm, deserialize=False,
                                    **self.listen_args)
        await self._listener.start()
        self.address = self._listener.contact_address
        return self.address

    def send(self, addr: str, env: Envelope, written: Callable[[], None] | None = None) -> None:
        """Queue `env` for `addr` (runtime loop only); delivery order is send order.

        `written()` is called once `env` was handed to the operating system, or failed.
        """
        peer = self._peers.get(addr)
        if peer is None:
            peer = self._peers[addr] = _Peer(self, addr)
        peer.send(env, written)

    def send_direct(self, addr: str, env: Envelope) -> bool:
        """Write `env` to `addr` now from a thread other than the loop's, when the connection is
        up and idle (nothing sent to it before still waits): True if it was committed, False if
        it must go through `send` on the loop. Only for envelopes without out-of-band buffers
        (a partly written batch keeps its bytes, not the caller's memory)."""
        peer = self._peers.get(addr)
        return peer is not None and peer.send_direct(env)

    def _mark_dirty(self, peer: _Peer) -> None:
        if not self._dirty:
            asyncio.get_running_loop().call_soon(self.flush)
        if peer not in self._dirty:
            self._dirty.append(peer)

    def flush(self) -> None:
        """Write every batch queued during this turn of the loop (loop only).

        Called by the mailbox when it finished routing a burst of posts, and otherwise by a
        callback scheduled with the first batch, so batching never waits for a loop turn more.
        """
        dirty, self._dirty = self._dirty, []
        for peer in dirty:
            peer.write_now()

    def _peer_failed(self, peer: _Peer, lost: list[Envelope], err: BaseException) -> None:
        if self._closing:
            return
        self._on_lost(peer.addr, lost, err)

    def _heard_of(self, addr: str, incarnation: str) -> None:
        """The process at `addr` is `incarnation` (from an opening exchange; loop)."""
        if not incarnation:
            return  # a peer that tells none (an older monarch): nothing to compare
        self.incarnations[addr] = incarnation
        if self.on_hello is not None:
            self.on_hello(addr, incarnation)

    def _lost_incoming(self, addr: str, incarnation: str, exc: BaseException,
                       serial: int) -> None:
        """Incoming connection `serial` from `incarnation` at `addr` broke: report it, unless
        the transport is closing, a newer process at that address was heard since, or the same
        process connected again since (the break of a connection it abandoned, e.g. across a
        network cut, is no news: its newest connection's break would be), or this transport
        gave the peer up after the connection was opened (`forget_peer`)."""
        if self._closing or (incarnation and self.incarnations.get(addr, incarnation)
                             != incarnation):
            return
        if self._latest_incoming.get(addr) != serial or serial <= self._abandoned.get(addr, 0):
            return
        self._on_lost(addr, [], translate_error(exc, addr))

    def _handle_socket(self, sock: socket.socket, peer_addr: str, incarnation: str) -> None:
        """An incoming plain tcp connection from `peer_addr`, its handshake done (`tcp.py`)."""
        if self._closing:
            sock.close()
            return
        self._heard_of(peer_addr, incarnation)
        serial = self._new_incoming(peer_addr)
        raw = SocketChannel(sock, lambda frames: self._received(peer_addr, frames),
                            lambda exc: self._raw_closed(raw, peer_addr, incarnation, exc,
                                                         serial))
        self._raw_incoming.add(raw)

    def _new_incoming(self, peer_addr: str) -> int:
        """Number a new incoming connection from `peer_addr`: it is that peer's newest."""
        self._incoming_serial += 1
        self._latest_incoming[peer_addr] = self._incoming_serial
        return self._incoming_serial

    def _raw_closed(self, raw: SocketChannel, peer_addr: str, incarnation: str,
                    exc: BaseException, serial: int) -> None:
        """An incoming raw connection broke (or was aborted by `close`)."""
        self._raw_incoming.discard(raw)
        self._lost_incoming(peer_addr, incarnation, exc, serial)

    async def _handle_comm(self, comm: Comm) -> None:
        self._incoming.add(comm)
        peer_addr = incarnation = ""
        serial = 0
        try:
            hello = await comm.read()
            peer_addr = hello["hello"]
            incarnation = str(hello.get("incarnation", ""))
            self._heard_of(peer_addr, incarnation)
            serial = self._new_incoming(peer_addr)
            if hello.get("raw") and _can_take_socket(comm):
                await comm.write({"ack": True, "incarnation": self.incarnation})
                raw = SocketChannel(
                    _take_socket(comm), lambda frames: self._received(peer_addr, frames),
                    lambda exc: None,
                )
                self._raw_incoming.add(raw)
                try:
                    exc = await raw.closed
                finally:
                    self._raw_incoming.discard(raw)
                self._lost_incoming(peer_addr, incarnation, exc, serial)
                return
            channel = _channel(comm)
            while True:
                self._on_batch(peer_addr, decode_batch(await channel.read()))
        except Exception as exc:
            if not isinstance(exc, _closed_errors):
                logger.exception("monarch: failed reading from %s",
                                 peer_addr or comm.peer_address)
            elif peer_addr:
                self._lost_incoming(peer_addr, incarnation, exc, serial)
        finally:
            self._incoming.discard(comm)
            if not comm.closed():
                comm.abort()

    def _received(self, peer_addr: str, frames: list[Any]) -> None:
        peer = self._peers.get(peer_addr)
        if peer is not None:
            peer.heard = True
        self._on_batch(peer_addr, decode_batch(frames))

    async def drain(self) -> None:
        """Wait until everything queued so far was written (or failed)."""
        while True:
            tasks = [p.task for p in self._peers.values() if p.task is not None]
            if not tasks:
                return
            await asyncio.wait(tasks)

    def forget_peer(self, addr: str) -> None:
        """Drop the outgoing comm to `addr` (the process there exited or was given up). The
        incoming connections it opened so far are given up too: their breaks are not reported,
        not even after the address was revived. The peer, which learns of this when our end of
        its connection closes, may take this process for dead in turn and close its own; that
        echo must not undo a re-attach to it (the break of a connection it opens later counts)."""
        self._abandoned[addr] = self._incoming_serial
        peer = self._peers.pop(addr, None)
        if peer is None:
            return
        if isinstance(peer.channel, SocketChannel):
            peer.channel.abort()
        elif peer.comm is not None:
            peer.comm.abort()

    async def close(self) -> None:
        self._closing = True
        for peer in list(self._peers.values()):
            try:
                await peer.close()
            except Exception:  # closing is best effort
                pass
        for comm in list(self._incoming):
            comm.abort()
        for raw in list(self._raw_incoming):
            raw.abort()
        if self._listener is not None:
            self._listener.stop()
