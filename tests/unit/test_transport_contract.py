"""The transport's contract, checked on every backend of the scheme registry
(`transport/registry.py`): `tcp://` (the `SocketChannel` that carries production traffic),
`tls://` (Dask's tornado stream under mutual TLS), `unix://` (Dask's connect, then a
`SocketChannel`) and `inproc://` (Dask's in-process comms); a scheme registered later is tested
without a change here (but for its malformed address, `MALFORMED`).

As Dask shares its `check_*` comm tests between its backends, every test taking `nodes` runs once
per backend: two or three transports in the test's own event loop talk to each other, and
received batches and lost envelopes are collected in asyncio queues the tests wait on. The pure
functions (`encode_batch`, `decode_batch`, `translate_error`) are checked once, at the end.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from distributed.comm.core import CommClosedError
from tornado.iostream import StreamClosedError

from monarch._src.config import configured
from monarch._src.runtime.envelope import decode, encode
from monarch._src.supervision.errors import MonarchError, TransportError
from monarch._src.transport import registry
from monarch._src.transport.comm import Transport, decode_batch, encode_batch, translate_error
from monarch._src.transport.tls import tls_args

WAIT = 5.0

BACKENDS = registry.schemes()


class _Backend:
    """How to listen on one backend, with which connection and listen arguments."""

    def __init__(self, name: str, tls: tuple[dict[str, Any], dict[str, Any]] | None) -> None:
        self.name = name
        self.tls = tls  # (connection args, listen args) for tls

    @property
    def listen_address(self) -> str:
        return registry.backend_for(f"{self.name}://").local_address()

    def transport(self, on_batch: Any, on_lost: Any, extra: dict[str, Any]) -> Transport:
        if self.tls is None:
            return Transport(on_batch, on_lost, dict(extra))
        conn, listen = self.tls
        transport = Transport(on_batch, on_lost, {**conn, **extra})
        transport.listen_args = dict(listen)
        return transport


@pytest.fixture(scope="module")
def tls_identity(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """Dask's TLS arguments for a throw-away CA, built by monarch's own `tls_args`."""
    pytest.importorskip("cryptography")
    from tests.tls_certs import write_cluster_cert

    env = write_cluster_cert(Path(tmp_path_factory.mktemp("tls")))
    with configured(enable_tls=True, tls_ca_file=env["MONARCH_TLS_CA_FILE"],
                    tls_cert_file=env["MONARCH_TLS_CERT_FILE"],
                    tls_key_file=env["MONARCH_TLS_KEY_FILE"]):
        args = tls_args()
    assert args is not None
    return args


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> _Backend:
    if request.param == "tls":
        return _Backend("tls", request.getfixturevalue("tls_identity"))
    return _Backend(request.param, None)


class _Node:
    """A transport plus what it received (`batches`) and what it reported lost (`lost`)."""

    def __init__(self, backend: _Backend, extra: dict[str, Any]) -> None:
        self.batches: asyncio.Queue[tuple[str, list[Any]]] = asyncio.Queue()
        self.lost: asyncio.Queue[tuple[str, list[Any], BaseException]] = asyncio.Queue()
        self.transport = backend.transport(
            lambda peer, envs: self.batches.put_nowait((peer, envs)),
            lambda peer, envs, err: self.lost.put_nowait((peer, envs, err)),
            extra,
        )
        self.listen_address = backend.listen_address
        self.address = ""

    async def start(self) -> _Node:
        self.address = await self.transport.start(self.listen_address)
        return self

    async def receive(self, n: int) -> tuple[list[Any], int]:
        """The next `n` envelopes received, and how many batches carried them."""
        envs: list[Any] = []
        batches = 0
        while len(envs) < n:
            _, batch = await asyncio.wait_for(self.batches.get(), WAIT)
            envs.extend(batch)
            batches += 1
        return envs, batches

    async def next_lost(self) -> tuple[str, list[Any], BaseException]:
        return await asyncio.wait_for(self.lost.get(), WAIT)


@pytest.fixture
async def nodes(backend: _Backend) -> AsyncIterator[Callable[..., Any]]:
    """A factory of started nodes on the test's backend; every node is closed after the test.
    `nodes(extra)` adds connection arguments (a short connect timeout)."""
    made: list[_Node] = []

    async def make(extra: dict[str, Any] | None = None) -> _Node:
        node = await _Node(backend, extra or {}).start()
        made.append(node)
        return node

    yield make
    for node in made:
        await node.transport.close()


# ---- addresses and ordering ---------------------------------------------------------------------


async def test_transport_start_returns_address_of_its_scheme(nodes: Any, backend: _Backend) -> None:
    a, b = await nodes(), await nodes()
    assert a.address.startswith(f"{backend.name}://")
    assert a.address != b.address
    assert a.transport.address == a.address


async def test_transport_batch_reports_sender_listen_address(nodes: Any) -> None:
    a, b = await nodes(), await nodes()
    a.transport.send(b.address, ("hello",))
    peer, envs = await asyncio.wait_for(b.batches.get(), WAIT)
    assert peer == a.address
    assert envs == [("hello",)]


async def test_transport_burst_of_sends_arrives_in_order_in_few_batches(nodes: Any) -> None:
    a, b = await nodes(), await nodes()
    n = 1000
    for i in range(n):
        a.transport.send(b.address, ("env", i))
    envs, batches = await b.receive(n)
    assert envs == [("env", i) for i in range(n)]
    # Sends made while the writer is busy travel together.
    assert batches < n


async def test_transport_sends_across_writes_keep_order(nodes: Any) -> None:
    a, b = await nodes(), await nodes()
    expected = []
    for round_ in range(20):
        for i in range(round_ + 1):
            a.transport.send(b.address, (round_, i))
            expected.append((round_, i))
        if round_ % 3 == 0:
            await a.transport.drain()
    envs, _ = await b.receive(len(expected))
    assert envs == expected
    assert b.batches.empty()


async def test_transport_two_senders_each_keep_order(nodes: Any) -> None:
    a, b, c = await nodes(), await nodes(), await nodes()
    for i in range(300):
        a.transport.send(c.address, ("a", i))
        b.transport.send(c.address, ("b", i))
    envs, _ = await c.receive(600)
    assert [i for (who, i) in envs if who == "a"] == list(range(300))
    assert [i for (who, i) in envs if who == "b"] == list(range(300))


async def test_transport_both_directions_deliver(nodes: Any) -> None:
    a, b = await nodes(), await nodes()
    a.transport.send(b.address, ("ping",))
    assert (await b.receive(1))[0] == [("ping",)]
    b.transport.send(a.address, ("pong",))
    assert (await a.receive(1))[0] == [("pong",)]


async def test_transport_send_to_self_delivers(nodes: Any) -> None:
    a = await nodes()
    a.transport.send(a.address, ("loop",))
    peer, envs = await asyncio.wait_for(a.batches.get(), WAIT)
    assert (peer, envs) == (a.address, [("loop",)])


async def test_transport_drain_returns_after_everything_written(nodes: Any) -> None:
    a, b = await nodes(), await nodes()
    for i in range(10):
        a.transport.send(b.address, ("env", i))
    await asyncio.wait_for(a.transport.drain(), WAIT)
    envs, _ = await b.receive(10)
    assert envs == [("env", i) for i in range(10)]


# ---- payloads ------------------------------------------------------------------------------------


async def test_transport_large_bytearray_travels_out_of_band(nodes: Any) -> None:
    a, b = await nodes(), await nodes()
    big = bytearray(range(256)) * (32 << 10)  # 8 MiB, every byte value
    assert len(big) == 8 << 20
    a.transport.send(b.address, ("call", encode(big)))
    envs, _ = await b.receive(1)
    kind, (data, buffers) = envs[0]
    assert kind == "call"
    assert len(data) < 4096  # the in-band frame holds only the pickle opcodes
    assert [memoryview(buf).nbytes for buf in buffers] == [len(big)]
    assert decode((data, buffers)) == big


async def test_transport_many_large_payloads_arrive_in_order(nodes: Any) -> None:
    a, b = await nodes(), await nodes()
    blobs = [bytearray([i]) * (1 << 20) for i in range(4)]
    for i, blob in enumerate(blobs):
        a.transport.send(b.address, (i, encode(blob)))
    envs, _ = await b.receive(4)
    assert [i for i, _ in envs] == [0, 1, 2, 3]
    assert [decode(p) for _, p in envs] == blobs


# ---- failures ------------------------------------------------------------------------------------


async def _address_nobody_listens_on(nodes: Any) -> str:
    gone = await nodes()
    await gone.transport.close()
    return str(gone.address)


# Dask retries a refused connect until its connect timeout (30 s by default): a sender that must
# find out at once about an address where nobody listens gives a short one.
FAST_CONNECT = {"timeout": 0.01}


async def test_transport_unknown_address_reports_lost_envelopes(nodes: Any) -> None:
    a = await nodes(FAST_CONNECT)
    nowhere = await _address_nobody_listens_on(nodes)
    a.transport.send(nowhere, ("first",))
    a.transport.send(nowhere, ("second",))
    peer, lost, err = await a.next_lost()
    assert peer == nowhere
    assert lost == [("first",), ("second",)]
    assert isinstance(err, TransportError)
    assert f"Could not reach {nowhere}" in str(err)
    assert isinstance(err.__cause__, OSError)


async def test_transport_connect_is_retried_for_message_delivery_timeout(nodes: Any) -> None:
    # Without a `timeout` connection argument, the configured key bounds the retries.
    with configured(message_delivery_timeout="300ms"):
        a = await nodes()
        nowhere = await _address_nobody_listens_on(nodes)
        a.transport.send(nowhere, ("x",))
        peer, lost, err = await a.next_lost()
    assert (peer, lost) == (nowhere, [("x",)])
    assert f"Could not reach {nowhere}" in str(err)
    assert "after 0.3 s" in str(err)


async def test_transport_failed_peer_later_send_lost_at_once(nodes: Any) -> None:
    a = await nodes(FAST_CONNECT)
    nowhere = await _address_nobody_listens_on(nodes)
    a.transport.send(nowhere, ("first",))
    _, _, err = await a.next_lost()
    a.transport.send(nowhere, ("later",))
    # Reported synchronously: no connection attempt is made again.
    peer, lost, again = a.lost.get_nowait()
    assert (peer, lost) == (nowhere, [("later",)])
    assert again is err


async def test_transport_listener_closed_sender_on_lost_called(nodes: Any) -> None:
    a, b = await nodes(), await nodes()
    # A connection each way, as between a controller and a proc that answers it.
    a.transport.send(b.address, ("call",))
    await b.receive(1)
    b.transport.send(a.address, ("reply",))
    await a.receive(1)
    await b.transport.close()
    peer, lost, err = await a.next_lost()
    assert peer == b.address
    assert lost == []
    assert isinstance(err, TransportError)
    assert b.address in str(err)


MALFORMED = {"inproc": "inproc://not-this-process/0/1", "tcp": "tcp://127.0.0.1:not-a-port",
             "tls": "tls://127.0.0.1:not-a-port", "unix": "unix://relative/path.sock"}


async def test_transport_malformed_address_reports_lost_envelope(
    nodes: Any, backend: _Backend
) -> None:
    a = await nodes()
    assert backend.name in MALFORMED, f"add a malformed {backend.name}:// address to MALFORMED"
    bad = MALFORMED[backend.name]
    a.transport.send(bad, ("x",))
    peer, lost, err = await a.next_lost()
    assert (peer, lost) == (bad, [("x",)])
    assert isinstance(err, TransportError)
    assert bad in str(err)


async def test_transport_send_after_listener_closed_reports_transport_error(nodes: Any) -> None:
    a, b = await nodes(), await nodes()
    a.transport.send(b.address, ("first",))
    await b.receive(1)
    await b.transport.close()
    a.transport.send(b.address, ("after close",))
    peer, _, err = await a.next_lost()
    assert peer == b.address
    assert isinstance(err, TransportError)
    assert b.address in str(err)
    # The backend's own error, kept as the cause (inproc and tls: a closed comm or stream; tcp:
    # the socket's ConnectionResetError).
    assert isinstance(err.__cause__, (CommClosedError, StreamClosedError, OSError))


async def test_transport_send_after_listener_closed_is_lost_at_once_once_known(nodes: Any) -> None:
    a, b = await nodes(), await nodes()
    a.transport.send(b.address, ("first",))
    await b.receive(1)
    await b.transport.close()
    a.transport.send(b.address, ("probe",))
    # Over tcp the probe may have reached the kernel before the close was seen (then only the
    # broken connection is reported); elsewhere its write fails and it is reported lost.
    _, lost, err = await a.next_lost()
    assert lost in ([], [("probe",)])
    a.transport.send(b.address, ("later",))
    # Once the sender knows, a send is reported lost synchronously, with the same error.
    peer, lost, again = a.lost.get_nowait()
    assert (peer, lost) == (b.address, [("later",)])
    assert again is err


async def test_transport_close_own_side_reports_nothing_lost(nodes: Any) -> None:
    a, b = await nodes(), await nodes()
    a.transport.send(b.address, ("x",))
    await b.receive(1)
    b.transport.send(a.address, ("y",))
    await a.receive(1)
    await a.transport.close()
    # b sees a go, but a, which closed on purpose, reports nothing about b.
    peer, _, _ = await b.next_lost()
    assert peer == a.address
    assert a.lost.empty()


# ---- batches and errors, without a backend ------------------------------------------------------


def test_transport_encode_batch_large_buffer_is_own_frame() -> None:
    big = bytearray(b"\xab" * (8 << 20))
    frames = encode_batch([("env", encode(big))])
    assert len(frames) == 2
    assert len(frames[0]) < 4096  # the pickled envelopes do not contain the 8 MiB
    assert memoryview(frames[1]).nbytes == len(big)
    # Zero copy on the way out: the frame is the sender's memory.
    big[0] = 0x01
    assert memoryview(frames[1])[0] == 0x01


def test_transport_decode_batch_roundtrips_envelopes() -> None:
    envs = [("a", 1, encode({"x": b"y" * 100_000})), ("b", None)]
    out = decode_batch(encode_batch(envs))
    assert out[1] == ("b", None)
    assert decode(out[0][2]) == {"x": b"y" * 100_000}


# ---- translate_error -----------------------------------------------------------------------------

ADDR = "inproc://192.0.2.7/1/2"


def test_translate_error_comm_closed_mentions_address() -> None:
    err = translate_error(CommClosedError("in <TCP>: Stream is closed"), ADDR)
    assert isinstance(err, TransportError)
    assert ADDR in str(err)
    assert "closed" in str(err)
    assert "Stream is closed" in str(err)


def test_translate_error_os_error_mentions_address() -> None:
    err = translate_error(ConnectionRefusedError("refused"), ADDR)
    assert isinstance(err, TransportError)
    assert f"Could not reach {ADDR}" in str(err)
    assert "refused" in str(err)


def test_translate_error_timeout_mentions_address() -> None:
    err = translate_error(asyncio.TimeoutError(), ADDR)
    assert isinstance(err, TransportError)
    assert ADDR in str(err)


def test_translate_error_other_names_type_and_address() -> None:
    err = translate_error(ValueError("weird"), ADDR)
    assert isinstance(err, TransportError)
    assert ADDR in str(err)
    assert "ValueError: weird" in str(err)


def test_translate_error_transport_error_passes_through() -> None:
    original = TransportError("already ours")
    assert translate_error(original, ADDR) is original


def test_translate_error_result_is_monarch_connection_error_and_pickles() -> None:
    err = translate_error(OSError("x"), ADDR)
    assert isinstance(err, MonarchError)
    assert isinstance(err, ConnectionError)
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is TransportError
    assert str(again) == str(err)


def test_translate_error_empty_message_reads_as_sentence() -> None:
    text = str(translate_error(CommClosedError(), ADDR))
    assert ADDR in text
    assert ": ." not in text
    assert text.endswith(".")
