"""What the transport's pieces promise each other: a connection's `Channel`, and the two views a
backend (`registry.Backend`) gets, of the local transport (`Local`) and of the peer it connects
to (`Outgoing`).

A backend turns an address into a `Channel` (connecting) or accepts connections (listening); the
per-peer writer of `comm.py` drives whatever channel it got through this protocol alone, so a
new kind of connection needs no change there. Channels differ in how they can write: a raw socket
(`SocketChannel`) takes a batch synchronously when nothing waits (`idle`), even from a caller's
thread (`direct`); a channel over someone else's stream (Dask's comms) only takes awaited writes,
and says so with `idle` and `direct` always False.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

__all__ = ["Channel", "Listener", "Local", "Outgoing"]


class Channel(Protocol):
    """One outgoing connection to a peer, carrying batches of frames.

    `write` works on every channel. The synchronous path (`write_now`, `drained`, and from
    another thread `write_direct` under `wlock`) is only taken while `idle` is True (and, for
    `write_direct`, `direct`): a channel that never answers True need not implement it beyond
    refusing.
    """

    # Whether `write_direct` may be used from a thread other than the loop's (a class constant).
    direct: bool

    @property
    def wlock(self) -> AbstractContextManager[Any]:
        """Held by every write, and by whoever checks `idle` before writing synchronously."""
        ...

    @property
    def idle(self) -> bool:
        """Nothing waits to be sent and `write_now` may be called now."""
        ...

    async def write(self, frames: list[Any]) -> None:
        """Send one batch; returns once it was handed over (the kernel, or the stream)."""
        ...

    def write_now(self, frames: list[Any]) -> bool:
        """Send one batch now (loop thread, `idle`): True if all of it was taken, else the rest
        goes out as the connection takes it and `drained()` completes then."""
        ...

    async def drained(self) -> None: ...

    def write_direct(self, frames: list[Any]) -> bool:
        """Send one batch from any thread, `wlock` held and the channel `idle` and `direct`:
        True once committed, False if nothing could be written."""
        ...

    def abort(self) -> None:
        """Drop the connection now (nothing more is sent)."""
        ...

    async def close(self) -> None:
        """Close the connection (gracefully where the backend can)."""
        ...


class Outgoing(Protocol):
    """The peer a backend connects to, as its connector sees it (`comm._Peer`)."""

    addr: str
    # How to drop the connection while it is being opened (its handshake), or None: set by a
    # connector whose opening can be interrupted, so that giving the peer up does not wait.
    abort_opening: Callable[[], None] | None

    def closed_under_us(self, exc: BaseException) -> None:
        """The connection broke while nothing was being written to it."""
        ...


class Listener(Protocol):
    """What a backend's listener offers the transport."""

    @property
    def contact_address(self) -> str: ...

    async def start(self) -> None: ...

    def stop(self) -> None: ...


class Local(Protocol):
    """The local transport (`comm.Transport`), as its backends see it."""

    address: str  # our listen address, told to every peer we connect to
    incarnation: str  # told to every peer in the opening exchange
    conn_args: dict[str, Any]  # the backend's connection arguments (timeout, TLS)
    listen_args: dict[str, Any]  # and its listen arguments

    def heard_of(self, addr: str, incarnation: str) -> None:
        """The process at `addr` is `incarnation` (told in an opening exchange)."""
        ...

    def hello(self, peer_addr: str, incarnation: str) -> int:
        """An incoming connection from `peer_addr` said hello: its serial (see `lost_incoming`)."""
        ...

    def accept_socket(self, sock: socket.socket, peer_addr: str, incarnation: str) -> None:
        """Carry an incoming connection, its opening exchange done, on a `SocketChannel`."""
        ...

    def adopt_socket(self, sock: socket.socket, peer_addr: str, incarnation: str,
                     serial: int) -> None:
        """As `accept_socket`, for a connection that said hello already (as `serial`)."""
        ...

    def received(self, peer_addr: str, frames: list[Any]) -> None:
        """A batch arrived from `peer_addr`."""
        ...

    def lost_incoming(self, peer_addr: str, incarnation: str, exc: BaseException,
                      serial: int) -> None:
        """Incoming connection `serial` broke."""
        ...

    def track(self, conn: Any) -> None:
        """An incoming connection (with `abort()`) to drop when the transport closes."""
        ...

    def untrack(self, conn: Any) -> None: ...
