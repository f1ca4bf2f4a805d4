"""A `unix://` comm backend for `distributed.comm`: unix-domain sockets between procs on one host.

`ChannelTransport.Unix` (`enable_transport("unix")` or `"ipc"`) makes the client and the procs
it spawns on its host listen on unix-domain sockets instead of loopback TCP. Dask's comm registry
(`distributed.comm.registry.backends`) maps a scheme to a backend; this module registers
"unix", so `distributed.comm.connect("unix:///path")` and `listen("unix:///path")` work like their
tcp counterparts. A connection is Dask's own `TCP` comm (a tornado `IOStream`) over an `AF_UNIX`
socket, so the rest of the transport is unchanged: after the handshake `comm.py` takes the socket
over with a `SocketChannel` exactly as for tcp.

Addresses are `unix://<absolute path>`. `default_listen_address()` picks a fresh path in a
per-user folder under the temp directory (unix socket paths are limited to 107 bytes, so the
names are short); the listener removes its socket file when it stops.

Rejected alternative: Linux abstract sockets (`@name`), which need no file but are visible to
every process in the network namespace, unprotected by file permissions.
"""

from __future__ import annotations

import atexit
import os
import socket
from collections.abc import Callable
from typing import Any, NoReturn

from distributed.comm.core import BaseListener, Connector
from distributed.comm.registry import Backend, backends
from distributed.comm.tcp import (
    MAX_BUFFER_SIZE,
    TCP,
    convert_stream_closed_error as _convert_closed,
)
from tornado import netutil
from tornado.iostream import IOStream, StreamClosedError
from tornado.tcpserver import TCPServer

from monarch._src.transport.owned_files import owned_name, socket_dir, sweep

# Dask's untyped helper, with its type: it raises the CommClosedError for a closed stream.
convert_stream_closed_error: Callable[[Any, StreamClosedError], NoReturn] = _convert_closed

__all__ = ["SCHEME", "default_listen_address", "register"]

SCHEME = "unix"
_PREFIX = "unix://"
_MAX_PATH = 107  # sun_path holds 108 bytes, one of them the terminating NUL


_swept = False


def _socket_dir() -> str:
    global _swept
    base = socket_dir()
    os.makedirs(base, mode=0o700, exist_ok=True)
    if not _swept:
        # Procs end with `os._exit` or a kill, which run no cleanup: the next process to
        # listen here removes the files of processes that are gone (`owned_files`).
        _swept = True
        sweep(base, "")
    return base


def default_listen_address() -> str:
    """A fresh `unix://` address in this user's socket folder."""
    return f"{_PREFIX}{os.path.join(_socket_dir(), owned_name('', '.sock'))}"


def _check_path(loc: str) -> str:
    if not loc.startswith("/"):
        raise ValueError(f"A unix transport address needs an absolute path: unix://{loc!r}.")
    if len(loc.encode()) > _MAX_PATH:
        raise ValueError(
            f"The unix socket path {loc!r} is longer than {_MAX_PATH} bytes; choose a shorter "
            f"one (or set TMPDIR to a shorter folder)."
        )
    return loc


class _UnixComm(TCP):
    """Dask's stream comm over a unix socket (see `_skip_unix_keepalive`)."""


def _skip_unix_keepalive() -> None:
    """Dask's TCP comm sets TCP keepalive options on its socket, which a unix socket refuses
    (and Dask logs the refusal as an error): skip them for unix sockets, keep them for TCP."""
    import distributed.comm.tcp as tcp

    original: Callable[[Any], None] = tcp.set_tcp_timeout
    if getattr(original, "_monarch_unix_aware", False):
        return

    def set_tcp_timeout(stream: Any) -> None:
        sock = getattr(stream, "socket", None)
        if sock is not None and sock.family == socket.AF_UNIX:
            return
        original(stream)

    set_tcp_timeout._monarch_unix_aware = True  # type: ignore[attr-defined]
    tcp.set_tcp_timeout = set_tcp_timeout


class _UnixConnector(Connector):
    async def connect(self, address: str, deserialize: bool = True, **kwargs: Any) -> _UnixComm:
        path = _check_path(address)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stream = IOStream(sock, max_buffer_size=int(MAX_BUFFER_SIZE))
        try:
            await stream.connect(path)
        except StreamClosedError as exc:
            convert_stream_closed_error(self, exc)
        return _UnixComm(stream, _PREFIX + path, _PREFIX + path, deserialize)


class _UnixListener(BaseListener):
    def __init__(self, loc: str, handle_comm: Any, deserialize: bool = True,
                 **connection_args: Any) -> None:
        super().__init__()
        self.path = _check_path(loc)
        self.handle_comm = handle_comm
        self.deserialize = deserialize
        self.server: TCPServer | None = None

    async def start(self) -> None:
        self.server = TCPServer(max_buffer_size=int(MAX_BUFFER_SIZE))
        self.server.handle_stream = self._handle_stream  # type: ignore[method-assign]
        self.server.add_socket(netutil.bind_unix_socket(self.path, mode=0o600))
        atexit.register(self.stop)  # a client exiting normally removes its file

    async def _handle_stream(self, stream: IOStream, address: Any) -> None:
        if self.server is None:
            stream.close()
            return
        comm = _UnixComm(stream, self.contact_address, self.contact_address, self.deserialize)
        await self.on_connection(comm)
        await self.handle_comm(comm)

    def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            atexit.unregister(self.stop)
            server.stop()
            try:
                os.unlink(self.path)
            except OSError:
                pass  # removed already: nothing is left behind

    @property
    def listen_address(self) -> str:
        return _PREFIX + self.path

    @property
    def contact_address(self) -> str:
        return _PREFIX + self.path


class _UnixBackend(Backend):
    def get_connector(self) -> Connector:
        return _UnixConnector()

    def get_listener(self, loc: str, handle_comm: Any, deserialize: bool,
                     **connection_args: Any) -> BaseListener:
        return _UnixListener(loc, handle_comm, deserialize, **connection_args)

    def get_address_host(self, loc: str) -> str:
        return socket.gethostname()

    def resolve_address(self, loc: str) -> str:
        return loc

    def get_address_host_port(self, loc: str) -> Any:
        raise ValueError(f"A unix transport address has no host and port: unix://{loc}.")

    def get_local_address_for(self, loc: str) -> str:
        return loc


def register() -> None:
    """Make `unix://` addresses usable with `distributed.comm` (idempotent)."""
    _skip_unix_keepalive()
    backends.setdefault(SCHEME, _UnixBackend())
