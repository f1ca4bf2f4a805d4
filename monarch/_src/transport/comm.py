"""Ordered, batched streams between procs.

Each proc listens on one address and keeps one persistent outgoing connection per peer
address. Everything a proc sends to a peer goes through that peer's `_Peer`: envelopes queue
in order and a single writer task sends whatever accumulated while the previous write was in
flight as one batch. One writer per peer gives per-(sender proc, receiver proc) FIFO, which is
what Monarch's per-(sender actor, receiver actor) ordering needs.

A batch is a list of frames: frame 0 is the pickled list of envelopes, the rest are the
out-of-band buffers of the payloads inside it, so large arrays and tensors are never copied into
a msgpack frame. How an address is connected to and listened on is its scheme's backend
(`registry.py`): `tcp.py` for plain tcp (asyncio sockets, Dask's handshake format, no Dask
import), `dask_comm.py` for tls, unix and inproc. Either hands the writer a `Channel`
(`channel.py`): a `SocketChannel` (one `sendmsg` per batch, batches cut from one `recv_into`)
for plain tcp and unix sockets, a channel on a Dask comm otherwise; the writer asks the channel
what it can do (`idle`, `direct`), never which class it is.

Rejected alternatives (see PERFORMANCE.md): Dask's pooled rpc (one comm per call in flight, a
handshake per connection reuse) and Dask actors (calls routed through the scheduler) are 10-100x
slower than one persistent comm per peer.

Besides this package (its Dask-served schemes, imported on first use), only `hosts/dask.py`
and `job/dask_job.py` import `distributed`. Every error it raises is translated by
`translate_error` into a monarch error, at this boundary.

Failure: each peer has one failure path (`_Peer._fail`) for a failed write, a failed drain and a
connection closed while idle (which reports the queued envelopes lost too). Once a sender was
told a peer is lost, later sends to it are reported lost at once with the same error; over tcp a
message sent right after the peer closed can still be dropped by the kernel unreported. A broken
connection is not reported when it belongs to an older incarnation of the peer than one already
heard, to a connection this process abandoned for a newer one, or to one opened before this
process gave the peer up (`forget_peer`): a host's echo of that close must not fail the
re-attach that follows a healed network cut.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import secrets
import socket
from collections.abc import Callable, Sequence
from typing import Any

from monarch._src.config import get as config_get
from monarch._src.supervision.errors import TransportError
from monarch._src.transport import dask_comm, registry
from monarch._src.transport.channel import Channel, Listener
from monarch._src.transport.socket_channel import SocketChannel
from monarch._src.transport.tls import listen_scheme, tls_args, tls_enabled

__all__ = ["BatchHandler", "LostHandler", "Transport", "TransportFactory", "preload",
           "translate_error"]

logger = logging.getLogger(__name__)

# Envelopes are opaque to the transport: any picklable tuple whose payloads keep their large
# buffers as `pickle.PickleBuffer`s. A tuple subclass (the runtime's typed records) arrives as a
# plain tuple: pickling a subclass costs a `__reduce_ex__` call per envelope.
Envelope = Any
BatchHandler = Callable[[str, list[Envelope]], None]
LostHandler = Callable[[str, list[Envelope], BaseException], None]


def preload() -> None:
    """Import now what a proc's transport will need (a fork server does, so that its children
    need not): its listen address's backend's (Dask's comm layer, unless procs listen on plain
    tcp, which does without it)."""
    try:
        address = default_listen_address()
    except ValueError:  # a transport the procs will refuse when they start: nothing to load
        return
    registry.backend_for(address).preload()


def translate_error(exc: BaseException, addr: str) -> TransportError:
    """The one place where Dask and OS errors become monarch errors."""
    if isinstance(exc, TransportError):
        return exc
    detail = f": {str(exc).removesuffix('.')}" if str(exc) else ""  # one period at the end
    closed = dask_comm.closed_errors  # empty until Dask was imported
    if closed and isinstance(exc, closed):
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
        self.channel: Channel | None = None  # None until connected
        # Drops the connection while its backend opens it (set by the backend), else None.
        self.abort_opening: Callable[[], None] | None = None
        self.task: asyncio.Task[None] | None = None  # the writer, while it runs
        self.failed: BaseException | None = None  # set once; a failed peer delivers nothing
        # Whether a batch came from this peer since the last `send_direct` to it. A direct write
        # saves a thread hop when a caller waits for each answer; while earlier sends are still
        # unanswered, calls go through the loop, which writes them in batches.
        self.heard = True

    def send(self, env: Envelope, written: Callable[[], None] | None = None
             ) -> list[Envelope] | None:
        """Queue `env` (loop); returns the queue it went to the end of (None: the peer failed,
        `env` was reported lost). Until the loop's turn ends, what is appended to that list
        goes out right behind it, in the same batch or the next."""
        if self.failed is not None:
            self.transport._on_lost(self.addr, [env], self.failed)
            if written is not None:
                written()
            return None
        queue = self.queue
        queue.append(env)
        if written is not None:
            self.written.append(written)
        if self.task is not None:
            return queue  # the writer takes it with the next batch
        channel = self.channel
        if channel is not None and channel.idle:
            self.transport._mark_dirty(self)  # written synchronously at the end of this turn
        else:
            self.task = asyncio.get_running_loop().create_task(self._write())
        return queue

    def send_direct(self, env: Envelope) -> bool:
        """Write `env` now from the calling thread (not the loop's), when nothing sent to this
        peer before is still waiting: True if it was committed to the socket, False if it must
        go the ordinary way (through the loop)."""
        channel = self.channel
        if channel is None or not channel.direct or self.failed is not None or not self.heard:
            return False
        with channel.wlock:
            if self.queue or self.task is not None or not channel.idle:
                return False
            self.heard = False
            # No out-of-band buffers here (`Transport.send_direct`): plain pickling will do.
            return channel.write_direct([pickle.dumps([tuple(env)], 5)])

    def write_now(self) -> None:
        """Write what is queued without a task, when the socket takes it (loop only)."""
        if self.task is not None or not self.queue or self.failed is not None:
            return
        channel = self.channel
        if channel is None or not channel.idle:
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
            assert self.channel is not None  # a batch was written in part on it
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

    async def _connect(self) -> Channel:
        channel = await registry.backend_for(self.addr).connect(self, self.transport)
        self.abort_opening = None
        return channel

    def closed_under_us(self, exc: BaseException) -> None:
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
        if self.channel is not None:
            await self.channel.close()
        elif self.abort_opening is not None:
            self.abort_opening()


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
        self._listener: Listener | None = None
        self._peers: dict[str, _Peer] = {}
        self._incoming: set[Any] = set()  # incoming connections a backend serves (`track`)
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
        """Listen on `address` (default: loopback, tcp or tls as configured), with the backend of
        its scheme (`registry`)."""
        if address is None:
            address = default_listen_address()
        listener = self._listener = registry.backend_for(address).listen(address, self)
        await listener.start()
        self.address = listener.contact_address
        return self.address

    def send(self, addr: str, env: Envelope, written: Callable[[], None] | None = None
             ) -> list[Envelope] | None:
        """Queue `env` for `addr` (runtime loop only); delivery order is send order.

        `written()` is called once `env` was handed to the operating system, or failed. Returns
        the peer's queue `env` went to the end of (`_Peer.send`), None if it was reported lost.
        """
        peer = self._peers.get(addr)
        if peer is None:
            peer = self._peers[addr] = _Peer(self, addr)
        return peer.send(env, written)

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

    def heard_of(self, addr: str, incarnation: str) -> None:
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

    # ---- incoming connections, as the backends report them (`channel.Local`) ----------------

    def accept_socket(self, sock: socket.socket, peer_addr: str, incarnation: str) -> None:
        """An incoming plain socket from `peer_addr`, its opening exchange done (`tcp.py`)."""
        if self._closing:
            sock.close()
            return
        self.adopt_socket(sock, peer_addr, incarnation, self.hello(peer_addr, incarnation))

    def hello(self, peer_addr: str, incarnation: str) -> int:
        """An incoming connection from `peer_addr` said hello: it is that peer's newest, and
        this is its serial."""
        self.heard_of(peer_addr, incarnation)
        self._incoming_serial += 1
        self._latest_incoming[peer_addr] = self._incoming_serial
        return self._incoming_serial

    def adopt_socket(self, sock: socket.socket, peer_addr: str, incarnation: str,
                     serial: int) -> None:
        """Read batches off incoming connection `serial` (a socket) with a `SocketChannel`."""
        if self._closing:
            sock.close()
            return
        raw = SocketChannel(sock, lambda frames: self.received(peer_addr, frames),
                            lambda exc: self._raw_closed(raw, peer_addr, incarnation, exc,
                                                         serial))
        self._raw_incoming.add(raw)

    def _raw_closed(self, raw: SocketChannel, peer_addr: str, incarnation: str,
                    exc: BaseException, serial: int) -> None:
        """An incoming raw connection broke (or was aborted by `close`)."""
        self._raw_incoming.discard(raw)
        self._lost_incoming(peer_addr, incarnation, exc, serial)

    def lost_incoming(self, peer_addr: str, incarnation: str, exc: BaseException,
                      serial: int) -> None:
        """Incoming connection `serial` (one a backend reads itself) broke."""
        self._lost_incoming(peer_addr, incarnation, exc, serial)

    def track(self, conn: Any) -> None:
        self._incoming.add(conn)

    def untrack(self, conn: Any) -> None:
        self._incoming.discard(conn)

    def received(self, peer_addr: str, frames: list[Any]) -> None:
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
        if peer.channel is not None:
            peer.channel.abort()
        elif peer.abort_opening is not None:
            peer.abort_opening()

    async def close(self) -> None:
        self._closing = True
        for peer in list(self._peers.values()):
            try:
                await peer.close()
            except Exception:  # closing is best effort
                pass
        for conn in list(self._incoming):
            conn.abort()
        for raw in list(self._raw_incoming):
            raw.abort()
        if self._listener is not None:
            self._listener.stop()


# What builds a process's transport from its two handlers (`Mailbox`'s `transport_factory`).
TransportFactory = Callable[[BatchHandler, LostHandler], Transport]
