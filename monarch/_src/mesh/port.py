"""User-facing ports: `Port`, `PortReceiver`, `Channel`.

A `Port` is an address `(proc address, port id)` plus the rank its messages carry; sending posts
a `PORT` envelope through the sending process's mailbox, so a port passed to another actor sends
from there. A `PortReceiver` reads the queue behind a port opened in this process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Generic, Protocol, TypeVar

from monarch._src.runtime.envelope import (
    PORT,
    PORT_CLOSED,
    PORT_ERROR,
    PORT_VALUE,
    PortAddr,
    PortMsg,
    encode,
)
from monarch._src.runtime.future import Future
from monarch._src.runtime.ports import QueuePort, decode_ranked
from monarch._src.runtime.runtime import get_runtime

__all__ = [
    "Channel", "Port", "PortHolder", "PortReceiver", "RankedPortReceiver", "receiving_ports",
    "start_handing", "stop_handing",
]

R = TypeVar("R")


class PortHolder(Protocol):
    """An actor that answers for the ports it received: when it fails, every port it still
    holds gets the failure, so no caller or receiver waits on a sender that is gone."""

    def port_received(self, port: Port[Any]) -> None: ...

    def port_used(self, port: Port[Any]) -> None: ...


# `holder` is set on an actor's thread while it decodes a message's arguments: the ports in
# them become that actor's to answer (see `receiving_ports`).
_receiving = threading.local()


@contextmanager
def receiving_ports(holder: PortHolder) -> Iterator[None]:
    """Ports unpickled inside this block are held by `holder` (the actor decoding its message)."""
    previous = start_receiving(holder)
    try:
        yield
    finally:
        stop_receiving(previous)


def start_receiving(holder: PortHolder) -> Any:
    """`receiving_ports` as two calls, for every endpoint call's decoding: ports unpickled on
    this thread from now on are held by `holder`; returns what `stop_receiving` restores (in a
    `finally`)."""
    previous = getattr(_receiving, "holder", None)
    _receiving.holder = holder
    return previous


def stop_receiving(previous: Any) -> None:
    _receiving.holder = previous


# `ports` is set on a thread while it encodes an endpoint call's arguments (`start_handing`):
# each port pickled into them is recorded, so the sending process can answer it if the proc it
# went to dies before answering (`Mailbox.ports_handed`).
_handing = threading.local()


def start_handing() -> tuple[list[tuple[tuple[str, int], int | None, bool]], Any]:
    """Collect `(port address, rank, once)` of the ports pickled on this thread from now on:
    returns the list they go to and what `stop_handing` restores (a call's arguments may be
    encoded while another's are: a port's `__reduce__` can encode). Two calls, not a context
    manager: this runs on every endpoint call."""
    previous = getattr(_handing, "ports", None)
    handed: list[tuple[tuple[str, int], int | None, bool]] = []
    _handing.ports = handed
    return handed, previous


def stop_handing(previous: Any) -> None:
    """End the collection `start_handing` began (in a `finally`)."""
    _handing.ports = previous


def _rebuild_port(addr: tuple[str, int], rank: int | None, once: bool = False) -> Port[Any]:
    port = Port._create(addr, rank, once)
    holder = getattr(_receiving, "holder", None)
    if holder is not None:
        port._holder = holder
        holder.port_received(port)
    return port


class Port(Generic[R]):
    """The sending end of a channel; picklable, usable from any thread of any actor."""

    __slots__ = ("_addr", "_holder", "_once", "_rank", "return_undeliverable")

    _addr: PortAddr  # (proc address, port id) of the receiving end
    _rank: int | None  # the rank each message carries (for ranked receivers), or None
    _once: bool  # the receiver takes one message from this sender (a reply port)
    # The actor in this process that received this port and answers for it if it fails
    # (`PortHolder`), or None (the client, or a port opened here). Not pickled.
    _holder: PortHolder | None
    return_undeliverable: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "Port cannot be constructed directly. Open one with Channel.open(), or receive one "
            "as an endpoint's response port."
        )

    @classmethod
    def _create(
        cls, addr: tuple[str, int], rank: int | None = None, once: bool = False
    ) -> Port[Any]:
        port = object.__new__(cls)
        port._addr = addr
        port._rank = rank
        port._once = once
        port._holder = None
        port.return_undeliverable = True
        return port

    def send(self, obj: R) -> None:
        """Send `obj` to the receiver; in order per sender, fire-and-forget.

        Large arrays and tensors in `obj` are written before `send` returns, so they may be
        changed right after.
        """
        self._post(encode(obj), PORT_VALUE)

    def exception(self, exc: BaseException) -> None:
        """Deliver `exc`: the receiver's `recv()` raises it."""
        self._post(encode(exc), PORT_ERROR)

    def _close(self) -> None:
        self._post(encode(None), PORT_CLOSED)

    def _post(self, payload: Any, status: int) -> None:
        holder = self._holder
        if holder is not None:
            holder.port_used(self)
        addr, port_id = self._addr
        env = PortMsg(PORT, port_id, payload, self._rank, status)
        get_runtime().mailbox.post_all([(addr, env)], payload)

    def __reduce__(self) -> tuple[Any, ...]:
        # Handing a reply port on makes its new holder the one that answers for it.
        holder = self._holder
        if holder is not None and self._once:
            holder.port_used(self)
        handed = getattr(_handing, "ports", None)
        if handed is not None:
            handed.append((self._addr, self._rank, self._once))
        return (_rebuild_port, (self._addr, self._rank, self._once))

    def __repr__(self) -> str:
        # torchmonarch keeps object's repr; its Port class lives at this path there.
        return f"<monarch._src.actor.actor_mesh.Port object at {id(self):#x}>"


class PortReceiver(Generic[R]):
    """The receiving end of a channel, in the process that opened it."""

    _entry: QueuePort
    _addr: PortAddr

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("PortReceiver cannot be constructed directly. Use Channel.open().")

    @classmethod
    def _create(cls, entry: QueuePort, addr: tuple[str, int]) -> PortReceiver[Any]:
        recv = object.__new__(cls)
        recv._entry = entry
        recv._addr = addr
        return recv

    def recv(self) -> Future[R]:
        """A future of the next message, in order."""
        return Future.from_concurrent(self._entry.take(), decode_ranked(self._entry.ranked))

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeError(
            "A PortReceiver cannot be sent to another actor: send its Port instead."
        )

    def __repr__(self) -> str:
        # torchmonarch keeps object's repr; its PortReceiver class lives at this path there.
        return f"<monarch._src.actor.actor_mesh.PortReceiver object at {id(self):#x}>"


class RankedPortReceiver(PortReceiver[R]):
    """A receiver whose `recv()` yields `(rank, value)` pairs."""


class Channel(Generic[R]):
    """Opens ports in the current process's mailbox: `port, receiver = Channel.open()`."""

    @staticmethod
    def open(once: bool = False) -> tuple[Port[R], PortReceiver[R]]:
        """A new `(Port, PortReceiver)` pair; with `once=True` the port takes one value."""
        entry = QueuePort(once=once)
        addr = get_runtime().mailbox.open_port(entry)
        return Port._create(addr, once=once), PortReceiver._create(entry, addr)

    @staticmethod
    def open_ranked(once: bool = False) -> tuple[Port[R], RankedPortReceiver[R]]:
        """Like `open`, but the receiver yields `(rank, value)` pairs: the sender's rank."""
        entry = QueuePort(once=once, ranked=True)
        addr = get_runtime().mailbox.open_port(entry)
        receiver = RankedPortReceiver._create(entry, addr)
        return Port._create(addr, once=once), receiver  # type: ignore[return-value]
