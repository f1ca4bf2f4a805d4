"""Plain `tcp://` connections without Dask's comm layer: listen, accept, connect, handshake.

Between procs, a tcp connection carries batches on a `SocketChannel` once its opening exchange is
done; Dask's comm layer was only needed for that exchange, and importing it (distributed,
tornado, dask.config, numpy) costs about 0.45 s, which a controller used to pay on its first
`this_host()`. This module does the same exchange with asyncio's socket calls, on the same wire
format as Dask's tcp comm, so either end may be a process that still opens its tcp connections
through `distributed.comm` (an older monarch):

1. both ends write a Dask handshake (`{"compression": None, "python": ..., "pickle-protocol":
   5}`), then read the other's;
2. the connecting end writes its hello, `{"hello": <its listen address>, "raw": True,
   "incarnation": <its transport's>}`;
3. the listening end answers `{"ack": True, "incarnation": <its>}`, and from then on the socket
   is a `SocketChannel`.

The incarnation (random per transport) tells a process that started at an address another one
used before from that one (`Transport.incarnations`).

Each of those messages is one Dask message: `<u64 n>` then n bytes holding `<u64 frame count>
<u64 length per frame>` and the frames; a message here is a single msgpack frame. Messages are
read with exact-length reads, so nothing that follows the exchange is ever buffered here.

A listener on a loopback address also accepts on a "side door": the Linux abstract unix socket
named after its address (`side_door`). A connector to a loopback address tries that door first
and falls back to tcp when nobody answers there: the same exchange runs over it, and the
listener's ack names its tcp address, which the connector checks, so a door can never lead to
another process than the address's. Addresses, hellos and everything above this module stay
tcp; only the bytes take the cheaper path. A unix-domain socket costs the kernel less than
loopback TCP per message: on this project's 2-core machine a small call's `sendmsg` went from
21 to 13 us and W2's round trip (one call at a time) from 330 to 301 us at p50, in interleaved
runs; torchmonarch talks to its local procs over unix sockets too.
An abstract name reaches exactly what the loopback address reaches (it is scoped to the network
namespace and has no file permissions, like the port), and it vanishes with its socket, so no
file is left behind by a killed proc. `SIDE_DOORS = False` turns the doors off (tests of the tcp
path itself).

Connecting retries a refused or unreachable address with a jittered exponential backoff, as
Dask's `connect` does, until its timeout (`message_delivery_timeout`, or the `timeout`
connection argument); the exchange itself has no timeout (nor had Dask's). Every socket gets the
options of `tune`: TCP_NODELAY, `channel_tcp_congestion`, and keepalive after
`channel_tcp_keepalive_idle` with the probes and user timeout Dask's comm used to set.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import ipaddress
import logging
import random
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

from monarch._src.config import duration_seconds, get as config_get
from monarch._src.transport.channel import Channel, Local, Outgoing
from monarch._src.transport.socket_channel import SocketChannel

__all__ = ["PREFIX", "SIDE_DOORS", "HandshakeError", "Listener", "connect", "listener",
           "open_channel", "parse_address", "preload", "set_congestion_control", "side_door",
           "tune", "unparse_address"]

logger = logging.getLogger(__name__)

PREFIX = "tcp://"
_U64 = struct.Struct("Q")  # Dask's comm framing: native byte order, 8-byte lengths
_MAX_MESSAGE = 1 << 16  # the opening messages are a few dozen bytes; more is not a peer
_BACKLOG = 2048  # as Dask's `distributed.comm.socket-backlog`
# Dead-peer detection Dask's tcp comm configured (`distributed.comm.timeouts.tcp`, 30 s): after
# the keepalive idle time, 10 probes 2 s apart; unacknowledged data fails the connection after
# 30 s.
_KEEPALIVE_PROBES = 10
_KEEPALIVE_INTERVAL = 2
_USER_TIMEOUT_MS = 30_000


# Whether loopback listeners open side doors and connectors try them (see the module docstring).
SIDE_DOORS = sys.platform == "linux"


class HandshakeError(ValueError):
    """A connection whose opening exchange is not monarch's (or Dask's)."""


# ---- addresses -----------------------------------------------------------------------------------


def parse_address(addr: str, default_port: int | None = None) -> tuple[str, int]:
    """(host, port) of 'tcp://host:port' (or 'tcp://[v6]:port'); the port may be left out only
    when `default_port` is given."""
    loc = addr[len(PREFIX):] if addr.startswith(PREFIX) else addr
    port: str | None
    if loc.startswith("["):
        host, sep, rest = loc[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"Malformed tcp address {addr!r}: expected 'tcp://[ipv6]:port'.")
        port = rest[1:] or None
    elif loc.count(":") == 1:
        host, port = loc.split(":")
    else:  # a bare host name, IPv4 or IPv6 address
        host, port = loc, None
    if port is None:
        if default_port is None:
            raise ValueError(f"The tcp address {addr!r} has no port: use 'tcp://host:port'.")
        return host, default_port
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"The tcp address {addr!r} has a bad port {port!r}.")
    return host, int(port)


def unparse_address(host: str, port: int) -> str:
    return f"{PREFIX}[{host}]:{port}" if ":" in host else f"{PREFIX}{host}:{port}"


def side_door(host: str, port: int) -> str | None:
    """The abstract unix socket name a listener at loopback `host:port` also accepts on; None
    for any other address (or with `SIDE_DOORS` off)."""
    if not SIDE_DOORS or not port:
        return None
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:  # a host name: not known to be this machine's loopback
        return None
    if not ip.is_loopback:
        return None
    return f"\0monarch-tcp-{ip.compressed}:{port}"


def _concrete_host(host: str, family: int) -> str:
    """The address other machines reach for a wildcard listen host (as Dask's contact address):
    this machine's address on its default route, found without sending a packet."""
    if host not in ("", "0.0.0.0", "::"):
        return host
    v6 = family == socket.AF_INET6
    probe = ("2001:4860:4860::8888", 80) if v6 else ("8.8.8.8", 80)
    with socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(probe)
            return str(s.getsockname()[0])
        except OSError:
            return "::1" if v6 else "127.0.0.1"


def _check_args(addr: str, args: dict[str, Any]) -> None:
    """Refuse what a plain tcp connection cannot honour: encryption (Dask's TLS arguments say
    `require_encryption`), or any argument but `timeout`."""
    if args.get("require_encryption"):
        raise RuntimeError(f"TLS is on (enable_tls): refusing the unencrypted address {addr!r}; "
                           "peers listen on tls:// addresses when TLS is on.")
    unknown = set(args) - {"timeout", "require_encryption"}
    if unknown:
        raise TypeError(f"Connection arguments {sorted(unknown)} do not apply to {addr}: a tcp "
                        "connection takes only 'timeout' (seconds).")
    timeout = args.get("timeout")
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise TypeError(f"The connection timeout for {addr} must be a positive number of "
                        f"seconds, not {timeout!r}.")


# ---- socket options ------------------------------------------------------------------------------


_refused_algorithms: set[str] = set()


def set_congestion_control(sock: socket.socket) -> None:
    """Apply `channel_tcp_congestion` to a TCP socket, best effort: an algorithm the kernel
    refuses (not built in, or not allowed for this user) is logged once and the socket keeps
    the host default."""
    algorithm = str(config_get("channel_tcp_congestion"))
    option = getattr(socket, "TCP_CONGESTION", None)
    if not algorithm or option is None:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, option, algorithm.encode())
    except OSError as exc:
        if algorithm not in _refused_algorithms:
            _refused_algorithms.add(algorithm)
            logger.warning(
                "monarch: channel_tcp_congestion=%r was refused by the kernel (%s); TCP "
                "connections keep the host default. See "
                "/proc/sys/net/ipv4/tcp_allowed_congestion_control.", algorithm, exc)


def tune(sock: socket.socket) -> socket.socket:
    """Non-blocking, TCP_NODELAY, `channel_tcp_congestion`, and keepalive probes after
    `channel_tcp_keepalive_idle` (then, as Dask's comm set them, 10 probes 2 s apart, and a 30 s
    TCP user timeout). Unix-domain sockets only become non-blocking."""
    sock.setblocking(False)
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return sock
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    set_congestion_control(sock)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    idle = getattr(socket, "TCP_KEEPIDLE", None)
    if idle is not None:  # Linux (macOS names it TCP_KEEPALIVE: the system default stays)
        seconds = max(1, int(duration_seconds("channel_tcp_keepalive_idle")))
        sock.setsockopt(socket.IPPROTO_TCP, idle, seconds)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, _KEEPALIVE_INTERVAL)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, _KEEPALIVE_PROBES)
    user_timeout = getattr(socket, "TCP_USER_TIMEOUT", None)  # Linux only
    if user_timeout is not None:
        sock.setsockopt(socket.IPPROTO_TCP, user_timeout, _USER_TIMEOUT_MS)
    return sock


# ---- the opening messages ------------------------------------------------------------------------


def _handshake_info() -> dict[str, Any]:
    """What Dask's comm tells its peer first (its `handshake_info`, without compression)."""
    return {"compression": None, "python": tuple(sys.version_info)[:3], "pickle-protocol": 5}


def _msgpack() -> Any:
    """msgpack, imported on the first handshake (or by `preload`) rather than with monarch."""
    import msgpack  # type: ignore[import-untyped]  # msgpack ships no type information

    return msgpack


def preload() -> None:
    """Import what the opening exchange needs now (a fork server does, for its children)."""
    _msgpack()


async def _write(sock: socket.socket, msg: dict[str, Any]) -> None:
    frame = _msgpack().packb(msg, use_bin_type=True)
    prelude = _U64.pack(1) + _U64.pack(len(frame))
    data = _U64.pack(len(prelude) + len(frame)) + prelude + frame
    await asyncio.get_running_loop().sock_sendall(sock, data)


async def _read_exactly(sock: socket.socket, n: int) -> bytearray:
    loop = asyncio.get_running_loop()
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = await loop.sock_recv_into(sock, view[got:])
        if k == 0:
            raise ConnectionResetError("the peer closed the connection during the handshake")
        got += k
    return buf


async def _read(sock: socket.socket) -> dict[str, Any]:
    """One Dask message holding a msgpack map (a handshake, a hello or an ack)."""
    (size,) = _U64.unpack(await _read_exactly(sock, _U64.size))
    if not _U64.size * 2 <= size <= _MAX_MESSAGE:
        raise HandshakeError(f"an opening message of {size} bytes")
    body = await _read_exactly(sock, size)
    (nframes,) = _U64.unpack_from(body)
    if nframes != 1:
        raise HandshakeError(f"an opening message of {nframes} frames")
    (length,) = _U64.unpack_from(body, _U64.size)
    if length != size - 2 * _U64.size:
        raise HandshakeError("an opening message whose frame does not fill it")
    try:
        msg = _msgpack().unpackb(body[2 * _U64.size:], raw=False, strict_map_key=False,
                              use_list=False)
    except Exception as exc:
        raise HandshakeError(f"an opening message that is not msgpack ({exc})") from exc
    if not isinstance(msg, dict):
        raise HandshakeError(f"an opening message that is a {type(msg).__name__}, not a map")
    return msg


# ---- connecting ----------------------------------------------------------------------------------


async def connect(addr: str, hello: str, args: dict[str, Any],
                  incarnation: str = "") -> tuple[socket.socket, str]:
    """A connected, tuned socket to the tcp listener at `addr`, its opening exchange done (we
    announce our listen address `hello` and our `incarnation`), and the listener's incarnation
    ("" from one that sends none). `args` are the transport's connection arguments: `timeout`
    (seconds; default `message_delivery_timeout`) bounds the retried connect."""
    _check_args(addr, args)
    host, port = parse_address(addr)
    door = side_door(host, port)
    if door is not None:
        found = await _through_side_door(door, _parsed_or_none(addr), hello, incarnation)
        if found is not None:
            return found
    given = args.get("timeout")
    timeout = duration_seconds("message_delivery_timeout") if given is None else float(given)
    sock = await _connect_with_retries(addr, host, port, timeout)
    try:
        ack = await _exchange(sock, hello, incarnation)
    except BaseException:
        sock.close()
        raise
    return sock, str(ack.get("incarnation", ""))


async def _exchange(sock: socket.socket, hello: str, incarnation: str) -> dict[str, Any]:
    """The connecting end's opening exchange; returns the listener's ack."""
    await _write(sock, _handshake_info())
    await _read(sock)  # the listener's handshake: nothing in it concerns us
    await _write(sock, {"hello": hello, "raw": True, "incarnation": incarnation})
    ack = await _read(sock)
    if not ack.get("ack"):
        raise HandshakeError(f"the listener answered the hello with {ack!r}")
    return ack


async def _through_side_door(door: str, target: tuple[str, int] | None, hello: str,
                             incarnation: str) -> tuple[socket.socket, str] | None:
    """Connect through the side door `door` of the listener at `target` (host, port), its
    exchange done; None when there is no door (nobody listens there), the exchange fails, or
    the ack names another address than `target` (then the caller connects over tcp)."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await loop.sock_connect(sock, door)
        ack = await _exchange(sock, hello, incarnation)
        named = ack.get("address")
        if not isinstance(named, str) or _parsed_or_none(named) != target:
            raise HandshakeError(f"the side door of {target} answered as {named!r}")
    except (OSError, HandshakeError) as exc:
        sock.close()
        logger.debug("monarch: no side door at %r (%s); connecting over tcp", door, exc)
        return None
    except BaseException:
        sock.close()
        raise
    return sock, str(ack.get("incarnation", ""))


def _parsed_or_none(addr: str) -> tuple[str, int] | None:
    try:
        host, port = parse_address(addr)
    except ValueError:
        return None
    try:
        return ipaddress.ip_address(host).compressed, port
    except ValueError:
        return host, port


async def _connect_with_retries(addr: str, host: str, port: int, timeout: float) -> socket.socket:
    """Like Dask's `connect`: a refused or unreachable address is retried after a random
    backoff (up to 10 ms, doubling each attempt) until `timeout`; one attempt is given a fifth
    of the timeout at first, then the whole remaining time."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + timeout
    attempt_cap = timeout / 5
    attempt = 0
    last: BaseException | None = None
    while (left := deadline - time.monotonic()) > 0:
        try:
            return await asyncio.wait_for(_connect_once(loop, host, port), min(attempt_cap, left))
        except (asyncio.TimeoutError, OSError) as exc:
            last = exc
            attempt_cap = timeout
            backoff = random.uniform(0, min(deadline - time.monotonic(), 0.01 * 2 ** attempt))
            attempt += 1
            await asyncio.sleep(max(0.0, backoff))
    raise OSError(f"Timed out trying to connect to {addr} after {timeout} s") from last


async def _connect_once(loop: asyncio.AbstractEventLoop, host: str, port: int) -> socket.socket:
    family, address = await _resolve(loop, host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        tune(sock)
        await loop.sock_connect(sock, address)
    except BaseException:
        sock.close()
        raise
    return sock


async def _resolve(loop: asyncio.AbstractEventLoop, host: str, port: int,
                   passive: bool = False) -> tuple[int, Any]:
    """The first (family, sockaddr) for host:port; numeric hosts without a thread (and, given
    as bytes, without importing the idna codec)."""
    flags = socket.AI_PASSIVE if passive else 0
    try:
        name = (host.encode() if host.isascii() else host) if host else None
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM,
                                   flags=flags | socket.AI_NUMERICHOST | socket.AI_NUMERICSERV)
    except socket.gaierror as exc:
        if exc.errno != socket.EAI_NONAME:
            raise
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=flags)
    family, _, _, _, address = infos[0]
    return family, address


# ---- listening -----------------------------------------------------------------------------------


def _close_if_cancelled(conn: socket.socket, task: asyncio.Task[None]) -> None:
    if task.cancelled():
        conn.close()


class Listener:
    """Accepts tcp connections at `address` ('tcp://host:port', port 0 for any) and hands each
    one, its opening exchange done, to `on_connection(sock, peer_listen_address,
    peer_incarnation)` on the loop. `args` are the transport's listen arguments, checked as
    `connect` checks them (their `timeout` concerns connecting only); `incarnation` is what the
    ack tells each peer."""

    def __init__(self, address: str, on_connection: Callable[[socket.socket, str, str], None],
                 args: dict[str, Any] | None = None, incarnation: str = "") -> None:
        _check_args(address, args or {})
        self.host, self.port = parse_address(address, default_port=0)
        self.on_connection = on_connection
        self.incarnation = incarnation
        self.contact_address = ""  # 'tcp://host:port' once started
        self._sock: socket.socket | None = None
        self._door: socket.socket | None = None  # the side door (module docstring), if open
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handshaking: dict[socket.socket, asyncio.Task[None]] = {}

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        family, address = await _resolve(loop, self.host, self.port, passive=True)
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            for attempt in range(5):  # an ephemeral port can be taken between pick and bind
                try:
                    sock.bind(address)
                    break
                except OSError as exc:
                    if self.port != 0 or exc.errno != errno.EADDRINUSE or attempt == 4:
                        raise
            sock.listen(_BACKLOG)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        bound_host, bound_port = sock.getsockname()[:2]
        self.contact_address = unparse_address(_concrete_host(bound_host, family), bound_port)
        self._loop = loop
        loop.add_reader(sock.fileno(), self._accept, sock)
        door = side_door(bound_host, bound_port)
        if door is not None:
            self._open_side_door(loop, door)

    def _open_side_door(self, loop: asyncio.AbstractEventLoop, door: str) -> None:
        """Also accept on `door`; without it (the name is held: a process that had this port
        is still ending) connectors simply come over tcp."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(door)
            sock.listen(_BACKLOG)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            logger.info("monarch: %s accepts over tcp only (its side door is taken: %s)",
                        self.contact_address, exc)
            return
        self._door = sock
        loop.add_reader(sock.fileno(), self._accept, sock)

    def _accept(self, listening: socket.socket) -> None:
        """Accept every pending connection (`listening`, the tcp socket or the side door, is
        readable)."""
        loop = self._loop
        assert loop is not None
        while self._sock is not None:
            try:
                conn, _ = listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors, say: log and wait for the next one
                logger.warning("monarch: accepting a connection on %s failed: %s",
                               self.contact_address, exc)
                return
            try:
                tune(conn)
            except OSError:  # reset before we could set it up
                conn.close()
                continue
            task = loop.create_task(self._handshake(conn))
            # A task cancelled before it ran never enters `_handshake`: close its socket here.
            task.add_done_callback(functools.partial(_close_if_cancelled, conn))
            self._handshaking[conn] = task

    async def _handshake(self, conn: socket.socket) -> None:
        try:
            await _write(conn, _handshake_info())
            await _read(conn)
            hello = await _read(conn)
            peer = hello.get("hello")
            if not isinstance(peer, str) or not hello.get("raw"):
                raise HandshakeError(f"expected a hello with a raw tcp stream, got {hello!r}")
            # The address lets a connector that came through the side door check where it is.
            await _write(conn, {"ack": True, "incarnation": self.incarnation,
                                "address": self.contact_address})
        except (OSError, HandshakeError) as exc:
            logger.info("monarch: a connection to %s failed before its handshake completed: %s",
                        self.contact_address, exc)
            conn.close()
            return
        finally:
            self._handshaking.pop(conn, None)
        self.on_connection(conn, peer, str(hello.get("incarnation", "")))

    def stop(self) -> None:
        """Stop accepting; connections still in their opening exchange are closed. The side
        door closes first: once the port is free, no door of this process answers for it."""
        door, self._door = self._door, None
        sock, self._sock = self._sock, None
        for listening in (door, sock):
            if listening is not None:
                if self._loop is not None and not self._loop.is_closed():
                    self._loop.remove_reader(listening.fileno())
                listening.close()
        for task in list(self._handshaking.values()):
            task.cancel()


# ---- the backend of the tcp:// scheme (`registry`) -----------------------------------------------


async def open_channel(out: Outgoing, local: Local) -> Channel:
    """Connect to `out.addr`: a `SocketChannel`, the opening exchange done."""
    sock, incarnation = await connect(out.addr, local.address, local.conn_args, local.incarnation)
    local.heard_of(out.addr, incarnation)
    return SocketChannel(sock, None, out.closed_under_us)


def listener(address: str, local: Local) -> Listener:
    """A `Listener` at `address` handing each connection to `local.accept_socket`."""
    return Listener(address, local.accept_socket, local.listen_args, local.incarnation)
