"""The TCP data plane: bytes stream between a socket and registered memory, with no copies.

Each owner proc runs one listener (started with its RDMA manager) and a thread per connection.
A request is a fixed header (op, buffer id, token, offset, length). For a READ the owner answers a
status byte and `sendall`s straight from the registered memory; for a WRITE it answers a status
byte, `recv_into`s straight into the registered memory, then acknowledges. The token in the
header is the capability: only holders of the handle know it, and a dropped buffer's token is no
longer accepted. The reader side `recv_into`s the destination directly and splits a
transfer of `PARALLEL_MIN` bytes or more into `rdma_tcp_fallback_parallelism` pieces, each on its
own connection at the same time (connections are kept in a per-endpoint pool for reuse).

Under TLS (`enable_tls`) every data-plane connection is mutual TLS with the configured
certificates (`lowlevel.ssl_contexts`), as the monarch connections are: the bytes and the token
never cross the network in clear, and a peer without a certificate signed by the CA is refused
during the handshake. The handshake runs on the connection's own thread on both sides; pooled
connections keep their session, so a transfer pays it once per connection.

Rejected alternative: carrying the bytes in actor messages. That costs a pickle frame, a copy in
and a copy out, and runs on the owner's runtime loop.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import ctypes
import logging
import socket
import struct
import threading
import time
from typing import TYPE_CHECKING

from monarch._src.config import get as config_get
from monarch._src.lowlevel import ssl_contexts, tls_enabled
from monarch._src.rdma.errors import RDMABufferDroppedError

if TYPE_CHECKING:
    import ssl

    from monarch._src.rdma.manager import Manager

__all__ = ["TcpDropped", "TcpServer", "TcpUnreachable", "close_idle", "tcp_read", "tcp_write"]

logger = logging.getLogger(__name__)

_HEADER = struct.Struct("!BQQQQ")  # op, buffer id, token, offset, length
_READ, _WRITE = 1, 2
_OK, _BAD = 0, 1
_STATUS = struct.Struct("!BI")  # status, length of the error text that follows
PARALLEL_MIN = 8 << 20  # transfers at least this large are split across streams
MAX_STREAMS = 64  # the most rdma_tcp_fallback_parallelism accepts (registry.py)
_SOCKBUF = 4 << 20
_HANDSHAKE_TIMEOUT = 30.0  # seconds a TLS peer has to finish its handshake


class TcpDropped(Exception):
    """The owner answered that the buffer is not registered (dropped) or the request is bad."""


class TcpUnreachable(ConnectionError):
    """The owner's listener could not be reached or the connection broke."""


def _view(addr: int, n: int) -> memoryview:
    return memoryview((ctypes.c_char * n).from_address(addr)).cast("B")


def _tune(s: socket.socket) -> None:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            s.setsockopt(socket.SOL_SOCKET, opt, _SOCKBUF)
        except OSError:
            pass  # capped by the kernel: the default size still works, only slower


def _recv_exact(s: socket.socket, view: memoryview) -> None:
    got = 0
    n = len(view)
    while got < n:
        k = s.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("the peer closed the connection mid-transfer")
        got += k


class TcpServer:
    """The owner's listener; serves reads and writes of registered buffers on its own threads."""

    def __init__(self, manager: Manager, host: str) -> None:
        self._manager = manager
        self._sock = socket.create_server((host, 0), backlog=128)
        if host in ("0.0.0.0", "::", ""):
            # Listening on every interface: advertise the address peers on other hosts dial.
            from monarch._src.lowlevel import routable_ip

            host = routable_ip()
        self.endpoint: tuple[str, int] = (host, self._sock.getsockname()[1])
        # Read when the listener starts: the TLS setting in force then applies to every peer.
        self._tls: ssl.SSLContext | None = ssl_contexts()[0] if tls_enabled() else None
        self._closed = False  # set by close(); the accept loop then exits
        threading.Thread(target=self._accept, name="monarch-rdma-tcp", daemon=True).start()

    def close(self) -> None:
        """Stop accepting connections (connections in progress finish their request)."""
        self._closed = True
        try:
            self._sock.close()
        except OSError:
            pass  # closed already

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            _tune(conn)
            threading.Thread(target=self._serve, args=(conn,), name="monarch-rdma-tcp-conn",
                             daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        head = bytearray(_HEADER.size)
        try:
            if self._tls is not None:
                conn.settimeout(_HANDSHAKE_TIMEOUT)  # a peer that never finishes it is dropped
                # The handshake is done apart from the wrap: a failed wrap closes the socket
                # before it raises, and the peer would see the close before the refusal is logged.
                conn = self._tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
                try:
                    conn.do_handshake()
                except OSError as exc:  # no certificate of our CA, or not TLS at all
                    logger.warning("monarch: refused an RDMA data-plane connection: %s", exc)
                    conn.close()
                    return
                conn.settimeout(None)
            with conn:
                while True:
                    try:
                        _recv_exact(conn, memoryview(head))
                    except ConnectionError:
                        return
                    op, bid, token, offset, length = _HEADER.unpack(head)
                    try:
                        addr = self._manager.resolve(bid, token, offset, length, op == _WRITE)
                    except (RDMABufferDroppedError, ValueError) as exc:
                        text = str(exc).encode()
                        conn.sendall(_STATUS.pack(_BAD, len(text)) + text)
                        return  # a write's payload may follow; do not try to resync
                    if op == _READ:
                        conn.sendall(_STATUS.pack(_OK, 0))
                        conn.sendall(_view(addr, length))
                    else:
                        conn.sendall(_STATUS.pack(_OK, 0))
                        _recv_exact(conn, _view(addr, length))
                        conn.sendall(_STATUS.pack(_OK, 0))
        except OSError as exc:
            logger.debug("monarch: rdma tcp connection ended: %s", exc)


# ---- the reader/writer side -----------------------------------------------------------------

_pool_lock = threading.Lock()
_idle: dict[tuple[str, int], list[socket.socket]] = {}  # endpoint -> connections ready for reuse
_streams: concurrent.futures.ThreadPoolExecutor | None = None  # leaf tasks only: never waits
_atexit_registered = False


def _stream_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _streams
    with _pool_lock:
        if _streams is None:
            # Threads start only as pieces wait, so the bound costs nothing unused; it lets two
            # transfers at the most parallelism run all their streams at once.
            _streams = concurrent.futures.ThreadPoolExecutor(
                max_workers=2 * MAX_STREAMS, thread_name_prefix="monarch-rdma-stream")
        return _streams


def _checkout(ep: tuple[str, int], timeout: float) -> socket.socket:
    with _pool_lock:
        idle = _idle.get(ep)
        if idle:
            return idle.pop()
    try:
        s = socket.create_connection(ep, timeout=max(timeout, 0.001))
    except OSError as exc:
        raise TcpUnreachable(f"could not connect to the RDMA data plane at {ep}: {exc}") from exc
    _tune(s)
    if tls_enabled():
        try:
            s = _client_tls().wrap_socket(s)
        except OSError as exc:
            s.close()
            raise TcpUnreachable(
                f"the TLS handshake with the RDMA data plane at {ep} failed: {exc}") from exc
    return s


_client_context: ssl.SSLContext | None = None


def _client_tls() -> ssl.SSLContext:
    """The client side of the mutual TLS, made once (loading the certificates costs ms)."""
    global _client_context
    with _pool_lock:
        if _client_context is None:
            _client_context = ssl_contexts()[1]
        return _client_context


def _checkin(ep: tuple[str, int], s: socket.socket) -> None:
    global _atexit_registered
    with _pool_lock:
        _idle.setdefault(ep, []).append(s)
        if not _atexit_registered:
            _atexit_registered = True
            atexit.register(close_idle)


def close_idle() -> None:
    """Close every pooled connection (at exit; later transfers open new ones)."""
    with _pool_lock:
        socks = [s for idle in _idle.values() for s in idle]
        _idle.clear()
    for s in socks:
        s.close()


def _status(s: socket.socket) -> None:
    head = bytearray(_STATUS.size)
    _recv_exact(s, memoryview(head))
    code, n = _STATUS.unpack(head)
    if code != _OK:
        text = bytearray(n)
        if n:
            _recv_exact(s, memoryview(text))
        raise TcpDropped(text.decode(errors="replace"))


def _one(op: int, ep: tuple[str, int], bid: int, token: int, offset: int, local: int,
         length: int, deadline: float) -> None:
    s = _checkout(ep, deadline - time.monotonic())
    ok = False
    try:
        s.settimeout(max(deadline - time.monotonic(), 0.001))
        s.sendall(_HEADER.pack(op, bid, token, offset, length))
        _status(s)
        if op == _READ:
            _recv_exact(s, _view(local, length))
        else:
            s.sendall(_view(local, length))
            _status(s)
        ok = True
    except TimeoutError as exc:
        raise TimeoutError(f"the RDMA data plane at {ep} did not finish in time") from exc
    except TcpDropped:
        raise
    except OSError as exc:
        raise TcpUnreachable(f"the RDMA data plane connection to {ep} broke: {exc}") from exc
    finally:
        if ok:
            _checkin(ep, s)
        else:
            s.close()


def _split(op: int, ep: tuple[str, int], bid: int, token: int, local: int, length: int,
           timeout: float) -> None:
    deadline = time.monotonic() + timeout
    streams = int(config_get("rdma_tcp_fallback_parallelism"))
    if length < PARALLEL_MIN or streams == 1:
        _one(op, ep, bid, token, 0, local, length, deadline)
        return
    step = -(-length // streams)
    pool = _stream_pool()
    futs = [pool.submit(_one, op, ep, bid, token, off, local + off, min(step, length - off),
                        deadline) for off in range(0, length, step)]
    _, pending = concurrent.futures.wait(futs, timeout=max(deadline - time.monotonic(), 0))
    if pending:
        raise TimeoutError(f"the RDMA data plane at {ep} did not finish in time")
    for f in futs:
        f.result()


def tcp_read(ep: tuple[str, int], bid: int, token: int, local: int, length: int,
             timeout: float) -> None:
    """Read `length` bytes of buffer `bid` at the owner's endpoint `ep` into address `local`."""
    _split(_READ, ep, bid, token, local, length, timeout)


def tcp_write(ep: tuple[str, int], bid: int, token: int, local: int, length: int,
              timeout: float) -> None:
    """Write `length` bytes from local address `local` into buffer `bid` at the owner's `ep`."""
    _split(_WRITE, ep, bid, token, local, length, timeout)
