"""monarch.job.PortForwarder: TCP forwarding between proc meshes over monarch messages."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from monarch._src.hosts.addresses import free_port
from monarch.actor import ActorError, this_host, this_proc
from monarch.job import PortForwarder


class EchoServer:
    """A loopback TCP server: answers each connection with b'echo:' + everything it read."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
            conn.sendall(b"echo:" + data)


def _roundtrip(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
        c.settimeout(30)
        c.sendall(payload)
        c.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := c.recv(65536):
            out += chunk
        return out


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.sock.close()


@pytest.mark.timeout(120)
def test_forwarded_port_reaches_the_service_and_stops_with_the_forwarder(echo: EchoServer) -> None:
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    fwd = this_proc().spawn("fwd", PortForwarder)
    try:
        base = free_port("127.0.0.1")
        ports = {0: base, 1: free_port("127.0.0.1")}
        # a function of the point picks each source proc's listening address
        fwd.forward.call_one(procs, echo.port, procs,
                             lambda p: f"127.0.0.1:{ports[p['gpus']]}").get(timeout=60)
        big = bytes(range(256)) * 2000  # 512 KB: several chunks, in order
        assert _roundtrip(ports[0], b"hi") == b"echo:hi"
        assert _roundtrip(ports[1], big) == b"echo:" + big
        results: list[bytes] = []
        threads = [threading.Thread(target=lambda i=i: results.append(
            _roundtrip(ports[i % 2], b"n%d" % i))) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(results) == sorted(b"echo:n%d" % i for i in range(6))
    finally:
        fwd.stop().get(timeout=60)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", ports[0]), timeout=10).close()
    procs.stop().get(timeout=60)


@pytest.mark.timeout(120)
def test_bad_forwards_are_refused(echo: EchoServer) -> None:
    one = this_host().spawn_procs(per_host={"gpus": 1})
    two = this_host().spawn_procs(per_host={"gpus": 2})
    fwd: Any = this_proc().spawn("fwd_bad", PortForwarder)
    try:
        cases = [
            ((one, 0, one, "127.0.0.1:1"), "dst_port must be an integer from 1 through 65535"),
            ((one, echo.port, one, "nope"), "src_address must use 'address:port' form"),
            ((one, echo.port, one, "h:x"), "src_address port must be an integer"),
            ((two, echo.port, one, "127.0.0.1:1"), "must have the same shape"),
        ]
        for args, message in cases:
            with pytest.raises(ActorError, match=message):
                fwd.forward.call_one(*args).get(timeout=60)
        # a port already taken fails the forward instead of leaving a half-started one
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = taken.getsockname()[1]
            with pytest.raises(ActorError, match="address already in use|Errno 98"):
                fwd.forward.call_one(one, echo.port, one, f"127.0.0.1:{busy}").get(timeout=60)
    finally:
        fwd.stop().get(timeout=60)
        one.stop().get(timeout=60)
        two.stop().get(timeout=60)


@pytest.mark.timeout(120)
def test_procs_of_a_host_share_one_source_address(echo: EchoServer) -> None:
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    fwd = this_proc().spawn("fwd_shared", PortForwarder)
    try:
        port = free_port("127.0.0.1")
        fwd.forward.call_one(procs, echo.port, procs, f"127.0.0.1:{port}").get(timeout=60)
        payloads = [bytes([i]) * 65536 for i in range(1, 9)]
        assert [_roundtrip(port, p) for p in payloads] == [b"echo:" + p for p in payloads]
    finally:
        fwd.stop().get(timeout=60)
        procs.stop().get(timeout=60)


@pytest.mark.timeout(120)
def test_a_client_reset_drops_the_services_connection_too() -> None:
    # The service streams to the client without end; the client resets its connection (RST):
    # the forward must close the service's connection, which then fails its writes.
    connected, broken = threading.Event(), threading.Event()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def stream() -> None:
        conn, _ = server.accept()
        connected.set()
        with conn:
            try:
                while True:
                    conn.sendall(b"x" * 65536)
            except OSError:
                broken.set()

    threading.Thread(target=stream, daemon=True).start()
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    fwd = this_proc().spawn("fwd_reset", PortForwarder)
    try:
        port = free_port("127.0.0.1")
        fwd.forward.call_one(procs.slice(gpus=0), server.getsockname()[1], procs.slice(gpus=1),
                             f"127.0.0.1:{port}").get(timeout=60)
        client = socket.create_connection(("127.0.0.1", port), timeout=30)
        assert connected.wait(30)
        # An end of stream first, then a reset (linger 0): the forward's side sees the end,
        # then fails writing; both must reach the service's side.
        client.shutdown(socket.SHUT_WR)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        assert broken.wait(30), "the service's connection outlived the client's reset"
    finally:
        fwd.stop().get(timeout=60)
        procs.stop().get(timeout=60)
        server.close()
