"""Reply ports as seen by the proc that owns them.

A port is an entry in its proc's port table, addressed by `(proc_address, port_id)`. Senders post
`PORT` envelopes to it; the proc's loop hands each to the entry's `deliver`. The entries here turn
replies into the state behind `Future`s: one reply (`call_one`, `choose`), one reply per rank
gathered in rank order (`call`), replies in arrival order (`stream`), or an open-ended queue
(`Channel.open`). Decoding of payloads is left to the reader's thread.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from monarch._src.runtime.completion import Completion
from monarch._src.runtime.envelope import (
    PORT_BATCH,
    PORT_CLOSED,
    PORT_ERROR,
    PORT_VALUE,
    Payload,
    decode,
)

__all__ = [
    "CountPort",
    "GatherPort",
    "OncePort",
    "PortEntry",
    "QueuePort",
    "StreamPort",
    "ValuePort",
    "decode_ranked",
    "decode_reply",
]

Reply = tuple[int, Payload]  # (status, payload)


def _settle(cf: concurrent.futures.Future[Any], value: Any = None,
            exc: BaseException | None = None) -> None:
    """Complete `cf` (on the loop) unless its reader cancelled it (`Future.cancel`, any thread):
    a reply that arrives as the call is cancelled is dropped."""
    try:
        if exc is None:
            cf.set_result(value)
        else:
            cf.set_exception(exc)
    except concurrent.futures.InvalidStateError:
        if not cf.cancelled():
            raise


def decode_reply(reply: Reply) -> Any:
    """Decode one raw reply: its value, or raise the exception it carries."""
    status, payload = reply
    value = decode(payload)
    if status == PORT_ERROR:
        raise value
    return value


class PortEntry:
    """Base of port-table entries: what `Mailbox.open_port` registers and `PORT` envelopes reach.

    Subclass it for a port with its own reaction to replies (the entries below, a heartbeat's
    pong, the tensor engine's rref port). `deliver` and `fail` run on the owning proc's loop;
    set `closed` once the entry expects nothing more, and the table drops it.
    """

    closed = False

    def deliver(self, payload: Payload, rank: int | None, status: int) -> None:
        """One `PORT` envelope arrived: its encoded `payload`, the sender's `rank` (None outside a
        mesh) and its status (`PORT_VALUE`, `PORT_ERROR` or `PORT_CLOSED`; `PORT_BATCH`, a
        host's gathered replies, reaches only a `GatherPort`)."""
        raise NotImplementedError

    def fail(self, exc: BaseException) -> None:
        """A sender this port waited on is gone: end with `exc` where a reply is still due."""
        raise NotImplementedError


class OncePort(Completion, PortEntry):
    """Exactly one reply completes `cf` with the raw reply `(status, payload)`.

    The port is its own future (`cf` is itself): one object per call in flight, not two."""

    @property
    def cf(self) -> Completion:
        return self

    def deliver(self, payload: Payload, rank: int | None, status: int) -> None:
        if not self.closed:
            self.closed = True
            # False if the reader cancelled the call first: the reply is dropped.
            self.finish_value((status, payload))

    def fail(self, exc: BaseException) -> None:
        if not self.closed:
            self.closed = True
            _settle(self, exc=exc)


class ValuePort(OncePort):
    """A `OncePort` that a plain value (no out-of-band buffers) completes with its pickle bytes
    alone, anything else with the raw reply `(status, payload)` (`call_one`, `choose`). Bytes
    are not tracked by the garbage collector and the two tuples of a raw reply are: W3 keeps
    10,000 replies waiting to be read."""

    def deliver(self, payload: Payload, rank: int | None, status: int) -> None:
        if not self.closed:
            self.closed = True
            self.finish_value(payload[0] if status == PORT_VALUE and not payload[1]
                              else (status, payload))


class GatherPort(PortEntry):
    """One reply per rank of `n`; completes `cf` with the raw replies in rank order.

    It also keeps the call's progress, read from other threads while replies come in (a mesh
    call's `partial()`, iteration and live widget): `posted`, when the port opened (just before
    the call was posted); `arrived[rank]`, when that rank's reply came (0.0 until then);
    `order`, the ranks that answered, in arrival order; `ended`, when the last reply came or
    the port failed (0.0 until then). A rank's reply is stored before it is appended to
    `order`, so a reader that snapshots `order` finds `replies` and `arrived` set for each rank
    in it. `on_reply`, when set, is called on the loop after every reply and when the port
    fails: it must be quick and must not block (it notifies waiting readers).
    """

    ended = 0.0
    on_reply: Callable[[], None] | None = None

    def __init__(self, n: int) -> None:
        self.cf: concurrent.futures.Future[list[Reply]] = Completion()
        self.replies: list[Reply | None] = [None] * n  # by rank; None until that rank answers
        self.missing = n
        self.posted = time.monotonic()
        self.arrived: list[float] = [0.0] * n
        self.order: list[int] = []
        if n == 0:
            self.closed = True
            self.ended = self.posted
            self.cf.set_result([])

    def deliver(self, payload: Payload, rank: int | None, status: int) -> None:
        if status == PORT_BATCH:  # a host's replies, gathered by its relay
            batch: Any = payload  # [(rank, status, payload), ...], see PORT_BATCH
            for one_rank, one_status, one_payload in batch:
                self.deliver(one_payload, one_rank, one_status)
            return
        if self.closed or rank is None or self.replies[rank] is not None:
            return
        now = time.monotonic()
        self.arrived[rank] = now
        self.replies[rank] = (status, payload)
        self.order.append(rank)
        self.missing -= 1
        if self.missing == 0:
            self.closed = True
            self.ended = now
            _settle(self.cf, self.replies)
        if self.on_reply is not None:
            self.on_reply()

    def fail(self, exc: BaseException) -> None:
        if not self.closed:
            self.closed = True
            self.ended = time.monotonic()
            _settle(self.cf, exc=exc)
            if self.on_reply is not None:
                self.on_reply()


class CountPort(GatherPort):
    """Completes `cf` with None once `n` replies arrived, whatever their ranks (acknowledgements).

    A peer that dies counts as having answered; an error reply fails `cf`.
    """

    def __init__(self, n: int) -> None:
        super().__init__(n)
        if n == 0:
            done = Completion()
            done.set_result(None)
            self.cf = done

    def deliver(self, payload: Payload, rank: int | None, status: int) -> None:
        if self.closed:
            return
        if status == PORT_ERROR:
            self.closed = True
            try:
                self.cf.set_exception(decode(payload))
            except BaseException as exc:  # the error itself could not be decoded
                self.cf.set_exception(exc)
            return
        self.missing -= 1
        if self.missing == 0:
            self.closed = True
            self.cf.set_result(None)  # type: ignore[arg-type]

    def fail(self, exc: BaseException) -> None:
        self.missing -= 1
        if not self.closed and self.missing <= 0:
            self.closed = True
            self.cf.set_result(None)  # type: ignore[arg-type]


class StreamPort(PortEntry):
    """`n` replies; the k-th to arrive completes the k-th future."""

    def __init__(self, n: int) -> None:
        self.cfs: list[concurrent.futures.Future[Reply]] = [
            Completion() for _ in range(n)
        ]
        self.next = 0  # index of the future the next reply completes
        self.closed = n == 0
        self.answered: set[int] = set()  # ranks that replied: a rank answers once

    def deliver(self, payload: Payload, rank: int | None, status: int) -> None:
        if self.closed:
            return
        if rank is not None:
            # A failed actor answers every port it still held: one that already replied
            # must not take a second place in the stream.
            if rank in self.answered:
                return
            self.answered.add(rank)
        _settle(self.cfs[self.next], (status, payload))
        self.next += 1
        self.closed = self.next == len(self.cfs)

    def fail(self, exc: BaseException) -> None:
        while not self.closed:
            _settle(self.cfs[self.next], exc=exc)
            self.next += 1
            self.closed = self.next == len(self.cfs)


class QueuePort(PortEntry):
    """An open-ended port behind a `PortReceiver`: values queue until `recv` takes them.

    Values and waiting receivers meet under a lock because `recv` runs on the receiver's thread
    while `deliver` runs on the loop.
    """

    def __init__(self, once: bool = False, ranked: bool = False) -> None:
        self.once = once
        self.ranked = ranked
        self._lock = threading.Lock()
        self._values: deque[tuple[int, Payload, int | None]] = deque()  # undelivered messages
        self._waiters: deque[concurrent.futures.Future[Any]] = deque()  # recv()s waiting
        self._error: BaseException | None = None  # set when the port can receive no more

    def deliver(self, payload: Payload, rank: int | None, status: int) -> None:
        with self._lock:
            if self.closed:
                return
            if self.once:
                self.closed = True
                # After its one message, a once-port answers later recv()s with EOFError.
                self._error = EOFError("Port closed: a once-port receives one message.")
            if status == PORT_CLOSED:
                self._error = EOFError("Port closed: the sender closed it.")
                self.closed = True
            elif self._waiters:
                self._waiters.popleft().set_result((status, payload, rank))
                return
            else:
                self._values.append((status, payload, rank))
                return
            self._wake_all_with_error()

    def fail(self, exc: BaseException) -> None:
        with self._lock:
            if self._error is None:
                self._error = exc
            self._wake_all_with_error()

    def _wake_all_with_error(self) -> None:
        while self._waiters:
            cf = self._waiters.popleft()
            if self._error is not None:
                cf.set_exception(self._error)

    def take(self) -> concurrent.futures.Future[Any]:
        """A future of the next message, `(status, payload, rank)`."""
        cf: concurrent.futures.Future[Any] = Completion()
        with self._lock:
            if self._values:
                cf.set_result(self._values.popleft())
            elif self._error is not None:
                cf.set_exception(self._error)
            else:
                self._waiters.append(cf)
        return cf


def decode_ranked(ranked: bool) -> Callable[[tuple[int, Payload, int | None]], Any]:
    """The decoder of a `QueuePort` message `(status, payload, rank)`: its value, or
    `(rank, value)` when `ranked`; an error reply raises."""

    def _decode(msg: tuple[int, Payload, int | None]) -> Any:
        status, payload, rank = msg
        value = decode_reply((status, payload))
        return (rank, value) if ranked else value

    return _decode
