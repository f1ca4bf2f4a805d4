"""A channel of many senders and one receiver (torchmonarch's `monarch._src.actor.mpsc`).

Senders call `send(value)` from any thread; the receiver takes values in send order with
`try_recv()` (None when empty) or `await recv()`, which waits without blocking the event loop
(the sender wakes the waiting loop with `call_soon_threadsafe`). When every sender is closed
and the channel is empty, receiving raises EOFError. `Receiver[T]` is `Receiver` itself at run
time, as on Monarch.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any, Generic, TypeVar

__all__ = ["Receiver", "Sender", "channel"]

T = TypeVar("T")

_EOF = "mpsc channel closed: every sender is gone and nothing is left to receive."


class _Unconvertible:
    """A queued item whose conversion to a Python value fails when it is received."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


class _Queue:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: collections.deque[Any] = collections.deque()
        self.senders = 0
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def wake(self) -> None:
        """Wake every waiting `recv` (called with the lock held)."""
        waiters, self.waiters = self.waiters, []
        for loop, fut in waiters:
            loop.call_soon_threadsafe(_resolve, fut)

    def take(self) -> tuple[bool, Any]:
        """(True, the next value), or (False, None) when empty (called with the lock held)."""
        if self.items:
            item = self.items.popleft()
            if isinstance(item, _Unconvertible):
                raise TypeError(f"mpsc Receiver: {item.why}.")
            return True, item
        if self.senders == 0:
            raise EOFError(_EOF)
        return False, None


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Sender(Generic[T]):
    """A sending end; any number of them, used from any thread."""

    __slots__ = ("_closed", "_queue")

    def __init__(self, queue: _Queue) -> None:
        self._queue = queue
        self._closed = False
        with queue.lock:
            queue.senders += 1

    def send(self, value: T) -> None:
        self._put(value)

    def send_unconvertible(self) -> None:
        """Enqueue an item whose conversion into a Python value fails (the receiver's error
        path): receiving it raises TypeError."""
        self._put(_Unconvertible("the item could not be converted into a Python value"))

    def _put(self, item: Any) -> None:
        queue = self._queue
        with queue.lock:
            if self._closed:
                raise RuntimeError("mpsc Sender.send on a closed sender; open a new channel.")
            queue.items.append(item)
            queue.wake()

    def close(self) -> None:
        """No more values from this sender; once all are closed the receiver sees EOF."""
        queue = self._queue
        with queue.lock:
            if self._closed:
                return
            self._closed = True
            queue.senders -= 1
            queue.wake()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()

    def __class_getitem__(cls, item: Any) -> Any:
        return cls


class Receiver(Generic[T]):
    """The receiving end: values in send order."""

    __slots__ = ("_queue",)

    def __init__(self, queue: _Queue) -> None:
        self._queue = queue

    def try_recv(self) -> T | None:
        """The next value, or None when none is queued (EOFError once all senders closed)."""
        with self._queue.lock:
            return self._queue.take()[1]  # type: ignore[no-any-return]

    async def recv(self) -> T:
        """Wait for the next value without blocking the event loop."""
        loop = asyncio.get_running_loop()
        queue = self._queue
        while True:
            with queue.lock:
                found, item = queue.take()
                if found:
                    return item  # type: ignore[no-any-return]
                fut: asyncio.Future[None] = loop.create_future()
                queue.waiters.append((loop, fut))
            await fut

    def __class_getitem__(cls, item: Any) -> Any:
        return cls


def channel() -> tuple[Sender[Any], Receiver[Any]]:
    """A new channel: its sender and its receiver."""
    queue = _Queue()
    return Sender(queue), Receiver(queue)
