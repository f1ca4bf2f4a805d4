"""Plain `tcp://` without Dask's comm layer (`transport/tcp.py`), beyond the transport contract
(test_transport_contract.py runs that on tcp too): the opening exchange stays Dask's, so a process
that still opens tcp connections through `distributed.comm` talks to a plain tcp one both ways;
connect retries; what the listener does with a stranger; addresses; refused arguments; socket
options. Everything runs on real loopback sockets in the test's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import struct
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from monarch._src.hosts.addresses import free_port
from monarch._src.supervision.errors import TransportError
from monarch._src.transport import tcp
from monarch._src.transport.comm import Transport, encode_batch
from monarch._src.transport.dask_comm import (
    connect as dask_connect,
    listen as dask_listen,
    serve,
    take_socket,
)
from monarch._src.transport.socket_channel import SocketChannel

pytestmark = pytest.mark.timeout(60)

WAIT = 10.0


class _Node:
    """A transport plus what it received (`batches`) and reported lost (`lost`)."""

    def __init__(self, conn_args: dict[str, Any]) -> None:
        self.batches: asyncio.Queue[tuple[str, list[Any]]] = asyncio.Queue()
        self.lost: asyncio.Queue[tuple[str, list[Any], BaseException]] = asyncio.Queue()
        self.transport = Transport(
            lambda peer, envs: self.batches.put_nowait((peer, envs)),
            lambda peer, envs, err: self.lost.put_nowait((peer, envs, err)),
            conn_args,
        )
        self.address = ""

    async def start(self, address: str = "tcp://127.0.0.1:0") -> _Node:
        self.address = await self.transport.start(address)
        return self

    async def next_batch(self) -> tuple[str, list[Any]]:
        return await asyncio.wait_for(self.batches.get(), WAIT)

    async def next_lost(self) -> tuple[str, list[Any], BaseException]:
        return await asyncio.wait_for(self.lost.get(), WAIT)


@pytest.fixture
async def nodes() -> AsyncIterator[Callable[..., Any]]:
    """A factory of nodes (started on loopback unless `start=False`), all closed afterwards."""
    made: list[_Node] = []

    async def make(conn_args: dict[str, Any] | None = None, start: bool = True) -> _Node:
        node = _Node(dict(conn_args or {}))
        made.append(node)
        return await node.start() if start else node

    yield make
    for node in made:
        await node.transport.close()


# ---- Dask's comm on the other end --------------------------------------------------------------


async def test_tcp_listener_serves_a_peer_that_connects_through_dask_comm(nodes: Any) -> None:
    """What an older proc does: Dask's connect and handshake, the hello, then the socket."""
    b = await nodes()
    comm = await dask_connect(b.address, deserialize=False)
    await comm.write({"hello": "tcp://10.1.2.3:4567", "raw": True})
    assert await comm.read() == {"ack": True, "incarnation": b.transport.incarnation,
                                 "address": b.address}
    channel = SocketChannel(take_socket(comm), None, lambda exc: None)
    await channel.write(encode_batch([("from", "dask"), ("second",)]))
    assert await b.next_batch() == ("tcp://10.1.2.3:4567", [("from", "dask"), ("second",)])
    channel.abort()
    peer, lost, err = await b.next_lost()
    assert (peer, lost) == ("tcp://10.1.2.3:4567", [])
    assert isinstance(err, TransportError)


async def test_tcp_connector_reaches_a_listener_served_by_dask_comm(nodes: Any) -> None:
    """What an older proc listens with: Dask's tcp listener handing comms to `serve`."""
    a, b = await nodes(), await nodes()
    listener = dask_listen("tcp://127.0.0.1:0", functools.partial(serve, b.transport),
                           deserialize=False)
    await listener.start()
    try:
        old = listener.contact_address
        for i in range(100):
            a.transport.send(old, ("call", i))
        received: list[Any] = []
        while len(received) < 100:
            peer, envs = await b.next_batch()
            assert peer == a.address
            received.extend(envs)
        assert received == [("call", i) for i in range(100)]
        # ... and the answer comes back over the plain tcp listener.
        b.transport.send(a.address, ("reply",))
        assert await a.next_batch() == (b.address, [("reply",)])
    finally:
        listener.stop()


# ---- connecting ----------------------------------------------------------------------------------


async def test_tcp_connect_retries_until_the_listener_appears(
    nodes: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = asyncio.Event()
    attempt = tcp._connect_once

    async def watched(*args: Any) -> socket.socket:
        try:
            return await attempt(*args)
        except OSError:
            refused.set()
            raise

    monkeypatch.setattr(tcp, "_connect_once", watched)
    a = await nodes()
    later = f"tcp://127.0.0.1:{free_port('127.0.0.1')}"
    a.transport.send(later, ("early",))
    await asyncio.wait_for(refused.wait(), WAIT)
    b = await nodes(start=False)
    await b.start(later)
    assert await b.next_batch() == (a.address, [("early",)])


async def test_tcp_connect_gives_up_after_its_timeout_with_dasks_words(nodes: Any) -> None:
    a = await nodes({"timeout": 0.2})
    nowhere = f"tcp://127.0.0.1:{free_port('127.0.0.1')}"
    a.transport.send(nowhere, ("x",))
    peer, lost, err = await a.next_lost()
    assert (peer, lost) == (nowhere, [("x",)])
    assert f"Could not reach {nowhere}: Timed out trying to connect" in str(err)


async def test_tcp_refuses_connection_arguments_it_does_not_use(nodes: Any) -> None:
    with pytest.raises(TypeError, match=r"\['ssl_context'\] do not apply"):
        await tcp.connect("tcp://127.0.0.1:1", "tcp://me:1", {"ssl_context": object()})
    with pytest.raises(TypeError, match="positive number of seconds, not '30s'"):
        await tcp.connect("tcp://127.0.0.1:1", "tcp://me:1", {"timeout": "30s"})
    node = await nodes({"ssl_context": None}, start=False)
    with pytest.raises(TypeError, match="ssl_context"):
        await node.start()


async def test_tcp_is_refused_when_encryption_is_required(nodes: Any) -> None:
    with pytest.raises(RuntimeError, match="refusing the unencrypted address"):
        await tcp.connect("tcp://127.0.0.1:1", "tls://me:1", {"require_encryption": True})
    node = await nodes({"require_encryption": True}, start=False)
    with pytest.raises(RuntimeError, match="TLS is on"):
        await node.start()


# ---- the listener --------------------------------------------------------------------------------


async def test_tcp_listener_drops_a_stranger_and_keeps_serving(
    nodes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    b = await nodes()
    host, port = tcp.parse_address(b.address)
    reader, writer = await asyncio.open_connection(host, port)
    with caplog.at_level("INFO", logger="monarch._src.transport.tcp"):
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        with contextlib.suppress(ConnectionResetError):  # closed with our bytes unread
            await asyncio.wait_for(reader.read(), WAIT)  # the listener's handshake, then EOF
    writer.close()
    assert "failed before its handshake completed" in caplog.text
    a = await nodes()
    a.transport.send(b.address, ("still",))
    assert await b.next_batch() == (a.address, [("still",)])


async def test_tcp_close_drops_connections_still_in_their_handshake(nodes: Any) -> None:
    b = await nodes()
    host, port = tcp.parse_address(b.address)
    reader, writer = await asyncio.open_connection(host, port)
    (size,) = struct.unpack("Q", await asyncio.wait_for(reader.readexactly(8), WAIT))
    await asyncio.wait_for(reader.readexactly(size), WAIT)  # the listener now waits for ours
    await b.transport.close()
    assert await asyncio.wait_for(reader.read(), WAIT) == b""
    writer.close()


async def test_tcp_listener_on_a_wildcard_host_gives_a_reachable_address(nodes: Any) -> None:
    b = await nodes(start=False)
    await b.start("tcp://0.0.0.0:0")
    host, port = tcp.parse_address(b.address)
    assert host not in ("0.0.0.0", "") and port > 0
    a = await nodes()
    a.transport.send(b.address, ("hi",))
    assert await b.next_batch() == (a.address, [("hi",)])


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback")
async def test_tcp_over_ipv6_loopback(nodes: Any) -> None:
    a, b = await nodes(start=False), await nodes(start=False)
    await a.start("tcp://[::1]:0")
    await b.start("tcp://[::1]:0")
    assert b.address.startswith("tcp://[::1]:")
    a.transport.send(b.address, ("v6",))
    assert await b.next_batch() == (a.address, [("v6",)])


async def test_tcp_sockets_get_keepalive_and_user_timeout_on_both_ends(
    nodes: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tcp, "SIDE_DOORS", False)  # loopback would take the side door
    a, b = await nodes(), await nodes()
    a.transport.send(b.address, ("x",))
    await b.next_batch()
    outgoing = a.transport._peers[b.address].channel
    (incoming,) = b.transport._raw_incoming
    for channel in (outgoing, incoming):
        assert isinstance(channel, SocketChannel)
        sock = channel.sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 10
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 2
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 30_000


# ---- the side door of a loopback listener --------------------------------------------------------

needs_doors = pytest.mark.skipif(not tcp.SIDE_DOORS, reason="side doors are Linux-only")


def _families(a: _Node, b: _Node) -> set[int]:
    outgoing = a.transport._peers[b.address].channel
    (incoming,) = b.transport._raw_incoming
    assert isinstance(outgoing, SocketChannel) and isinstance(incoming, SocketChannel)
    return {outgoing.sock.family, incoming.sock.family}


@needs_doors
async def test_tcp_loopback_peers_talk_through_the_side_door(nodes: Any) -> None:
    """Two loopback peers: the bytes go over the unix socket named after the address, while
    addresses, hellos and incarnations stay tcp's."""
    a, b = await nodes(), await nodes()
    assert a.address.startswith("tcp://127.0.0.1:") and b.address.startswith("tcp://127.0.0.1:")
    for i in range(3):
        a.transport.send(b.address, ("call", i))
    got: list[Any] = []
    while len(got) < 3:
        peer, envs = await b.next_batch()
        assert peer == a.address
        got.extend(envs)
    assert got == [("call", i) for i in range(3)]
    assert _families(a, b) == {socket.AF_UNIX}
    assert a.transport.incarnations[b.address] == b.transport.incarnation
    assert b.transport.incarnations[a.address] == a.transport.incarnation
    b.transport.send(a.address, ("reply",))
    assert await a.next_batch() == (b.address, [("reply",)])


@needs_doors
async def test_tcp_side_door_that_names_another_address_is_not_taken(nodes: Any) -> None:
    """A side door held by some other process (one that answers for another address) is left
    alone: the connector goes over tcp to the address it was given."""
    port = free_port("127.0.0.1")
    door = tcp.side_door("127.0.0.1", port)
    assert door is not None
    impostor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    impostor.bind(door)
    impostor.listen(4)
    impostor.setblocking(False)
    loop = asyncio.get_running_loop()

    async def pretend() -> None:
        conn, _ = await loop.sock_accept(impostor)
        with conn:
            await tcp._write(conn, tcp._handshake_info())
            await tcp._read(conn)
            await tcp._read(conn)
            await tcp._write(conn, {"ack": True, "incarnation": "x",
                                    "address": "tcp://127.0.0.1:1"})

    pretending = asyncio.ensure_future(pretend())
    try:
        b = await nodes(start=False)
        await b.start(f"tcp://127.0.0.1:{port}")  # its own door is taken: tcp only
        a = await nodes()
        a.transport.send(b.address, ("right one",))
        assert await b.next_batch() == (a.address, [("right one",)])
        await asyncio.wait_for(pretending, WAIT)
        assert _families(a, b) == {socket.AF_INET}
    finally:
        pretending.cancel()
        impostor.close()


@needs_doors
async def test_tcp_side_door_closes_with_its_listener(nodes: Any) -> None:
    b = await nodes()
    host, port = tcp.parse_address(b.address)
    door = tcp.side_door(host, port)
    assert door is not None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        with pytest.raises(OSError):
            probe.bind(door)  # held by b's listener
    await b.transport.close()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.bind(door)  # free again


def test_tcp_side_door_is_only_for_loopback_addresses() -> None:
    assert tcp.side_door("10.1.2.3", 80) is None
    assert tcp.side_door("localhost", 80) is None  # a name: not known to be loopback
    assert tcp.side_door("127.0.0.1", 0) is None
    if tcp.SIDE_DOORS:
        assert tcp.side_door("127.0.0.1", 80) == "\0monarch-tcp-127.0.0.1:80"
        assert tcp.side_door("::1", 80) == "\0monarch-tcp-::1:80"


# ---- addresses -----------------------------------------------------------------------------------


def test_tcp_parse_address() -> None:
    assert tcp.parse_address("tcp://127.0.0.1:80") == ("127.0.0.1", 80)
    assert tcp.parse_address("tcp://[::1]:81") == ("::1", 81)
    assert tcp.parse_address("tcp://example.org", default_port=0) == ("example.org", 0)
    assert tcp.parse_address("tcp://[fe80::1]", default_port=0) == ("fe80::1", 0)
    with pytest.raises(ValueError, match="has no port"):
        tcp.parse_address("tcp://127.0.0.1")
    with pytest.raises(ValueError, match="bad port"):
        tcp.parse_address("tcp://127.0.0.1:http")
    with pytest.raises(ValueError, match="Malformed"):
        tcp.parse_address("tcp://[::1")
    assert tcp.unparse_address("::1", 5) == "tcp://[::1]:5"
    assert tcp.unparse_address("10.0.0.1", 5) == "tcp://10.0.0.1:5"


# ---- the opening messages ------------------------------------------------------------------------


def _message(frames: list[bytes], size: int | None = None) -> bytes:
    prelude = struct.pack(f"Q{len(frames)}Q", len(frames), *map(len, frames))
    body = prelude + b"".join(frames)
    return struct.pack("Q", len(body) if size is None else size) + body


MALFORMED_OPENINGS = {
    "huge": (_message([b"\x80"], size=1 << 40), "of 1099511627776 bytes"),
    "two frames": (_message([b"\x80", b"\x80"]), "of 2 frames"),
    "short frame": (struct.pack("QQQ", 17, 1, 5) + b"\x80", "does not fill it"),
    "not msgpack": (_message([b"\xc1"]), "not msgpack"),
    "not a map": (_message([b"\x93\x01\x02\x03"]), "a tuple, not a map"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_OPENINGS))
async def test_tcp_malformed_opening_message_is_a_handshake_error(case: str) -> None:
    data, words = MALFORMED_OPENINGS[case]
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setblocking(False)
        theirs.sendall(data)
        with pytest.raises(tcp.HandshakeError, match=words):
            await asyncio.wait_for(tcp._read(ours), WAIT)


async def test_tcp_opening_message_is_what_dask_reads() -> None:
    """Our framing of a message, read back by Dask's own frame parser and msgpack decoding."""
    from distributed.protocol.core import loads
    from distributed.protocol.utils import unpack_frames

    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setblocking(False)
        await tcp._write(ours, {"hello": "tcp://h:1", "raw": True})
        data = theirs.recv(1 << 16)
    (size,) = struct.unpack_from("Q", data)
    assert size == len(data) - 8
    assert loads(unpack_frames(data[8:]), deserialize=False) == {"hello": "tcp://h:1", "raw": True}
