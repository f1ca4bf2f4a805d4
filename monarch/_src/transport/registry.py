"""The transport's backends, by address scheme: how to connect to and listen on each scheme.

`Transport` (comm.py) looks an address's scheme up here instead of knowing the schemes itself:
`tcp://` is served by `tcp.py` without Dask; `tls://`, `unix://` and `inproc://` (the in-process
comms unit tests use) by Dask's comm layer (`dask_comm.py`). A scheme is registered once, with
its connector (`await connect(peer, local) -> Channel`), its listener factory (`listen(address,
local) -> Listener`), what a fork server imports ahead for it (`preload`) and a fresh address on
this host to listen on (`local_address`). The transport contract tests run on every registered
scheme, each listening on its `local_address()`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from monarch._src.transport import dask_comm, tcp
from monarch._src.transport.channel import Channel, Listener, Local, Outgoing

__all__ = ["Backend", "backend_for", "register", "schemes"]

Connector = Callable[[Outgoing, Local], Awaitable[Channel]]
ListenerFactory = Callable[[str, Local], Listener]


@dataclass(frozen=True)
class Backend:
    """How one address scheme connects (`connect`) and listens (`listen`)."""

    scheme: str
    connect: Connector
    listen: ListenerFactory
    preload: Callable[[], None]  # imports what connecting or listening will need
    local_address: Callable[[], str]  # an address on this host to listen on, fresh each call


_backends: dict[str, Backend] = {}


def register(scheme: str, connect: Connector, listen: ListenerFactory,
             preload: Callable[[], None], local_address: Callable[[], str]) -> Backend:
    """Serve `scheme://` addresses with `connect` and `listen`; a scheme is registered once."""
    if scheme in _backends:
        raise ValueError(f"The transport scheme {scheme!r} is registered already.")
    backend = _backends[scheme] = Backend(scheme, connect, listen, preload, local_address)
    return backend


def schemes() -> tuple[str, ...]:
    """The registered schemes, in registration order."""
    return tuple(_backends)


def backend_for(addr: str) -> Backend:
    """The backend of `addr`'s scheme; ValueError naming the address and the schemes there are."""
    scheme, sep, _ = addr.partition("://")
    backend = _backends.get(scheme) if sep else None
    if backend is None:
        known = ", ".join(f"{s}://" for s in _backends)
        raise ValueError(
            f"No transport serves the address {addr!r}: its scheme is none of {known}. "
            "Use an address of one of those schemes."
        )
    return backend


def _unix_address() -> str:
    from monarch._src.transport import unix  # imports Dask: only once a unix address is needed

    return unix.default_listen_address()


register("tcp", tcp.open_channel, tcp.listener, tcp.preload, lambda: "tcp://127.0.0.1:0")
register("tls", dask_comm.open_channel, dask_comm.listener, dask_comm.preload,
         lambda: "tls://127.0.0.1:0")
register("unix", dask_comm.open_channel, dask_comm.listener, dask_comm.preload, _unix_address)
register("inproc", dask_comm.open_channel, dask_comm.listener, dask_comm.preload,
         lambda: "inproc://")
