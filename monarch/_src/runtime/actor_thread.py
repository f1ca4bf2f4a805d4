"""The thread, event loop and FIFO inbox behind each actor.

Each actor handles one message at a time in arrival order, async endpoints included: the loop
awaits each handler before taking the next message. Handlers that want concurrency
(`@concurrent_endpoint`, `__supervise__`) start tasks on this loop themselves. The loop is
long-lived, so asyncio objects an actor creates persist across messages.

The inbox is a deque filled from the process's runtime loop thread; the actor's loop is woken
only when it was idle, so a burst of messages costs one wake-up.

Waking: while the actor's loop watches no file but its own wake-up socket (an actor doing no I/O
of its own), it sleeps on a lock rather than in epoll (`_IdleSelector`). Waking it is then one
futex release that keeps the GIL, where asyncio's wake-up socket costs a `send` on the waking
thread and a `recv` on the woken one, each releasing the GIL: on a busy process every message
paid two GIL hand-offs between the runtime loop and the actor (traced on W2, p50: 114 us from
the runtime loop taking a call to the endpoint starting, 73 us with the lock).

An idle actor's messages are handled in that wake-up itself, while their handlers are
synchronous (`ActorThread._wake`); the main task (`_main`) resumes for an awaitable and for
whatever comes while it runs one.
"""

from __future__ import annotations

import _thread
import asyncio
import contextvars
import logging
import selectors
import sys
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["STOP", "ActorThread"]

logger = logging.getLogger(__name__)

STOP: Any = object()  # enqueue this to end the thread after everything queued before it

Handler = Callable[[Any], "Awaitable[None] | None"]


# `_IdleSelector._state`: how the loop's thread is waiting, which says how to wake it.
_AWAKE, _ON_LOCK, _POLLING = 0, 1, 2


class _IdleSelector(selectors.BaseSelector):
    """The actor loop's selector: epoll, except that while the loop watches nothing but its own
    wake-up socket it sleeps on a lock (see the module docstring). `ring()` wakes it from any
    thread; `on_wake()` is called on the loop after every wait, before the loop runs what is
    ready."""

    def __init__(self) -> None:
        self._inner = selectors.DefaultSelector()
        self._bell = _thread.allocate_lock()
        self._bell.acquire()  # held while no ring is pending: a sleeper blocks on it
        self._state = _AWAKE
        self._rung = False  # a ring since the last wait ended: the next wait must not block
        self.on_wake: Callable[[], None] = _nothing

    def ring(self) -> bool:
        """Wake the loop (any thread). False while it polls its files: the caller must write
        its wake-up socket. (The ring is recorded before the state is read, and the loop records
        its state before it reads the ring: one of the two sees the other.)"""
        self._rung = True
        state = self._state
        if state == _ON_LOCK:
            try:
                self._bell.release()
            except RuntimeError:  # rung already since it went to sleep
                pass
        return state != _POLLING

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        inner = self._inner
        if len(inner.get_map()) > 1:  # files besides the wake-up socket: epoll must watch them
            self._state = _POLLING
            try:
                events = inner.select(0 if self._rung else timeout)
            finally:
                self._state = _AWAKE
        else:
            self._state = _ON_LOCK
            if not self._rung and (timeout is None or timeout > 0):
                self._bell.acquire(True, -1 if timeout is None else timeout)
            self._state = _AWAKE
            events = []
        self._rung = False
        self.on_wake()
        return events

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.get_key(fileobj)

    def get_map(self) -> Any:
        return self._inner.get_map()

    def close(self) -> None:
        self._inner.close()


def _nothing() -> None:
    pass


class _ActorLoop(asyncio.SelectorEventLoop):
    """An event loop on an `_IdleSelector`: `call_soon_threadsafe` rings its bell, and writes
    the wake-up socket only while the loop polls files."""

    def __init__(self) -> None:
        self.idle = _IdleSelector()
        super().__init__(self.idle)

    def _write_to_self(self) -> None:  # what asyncio's call_soon_threadsafe calls to wake it
        if not self.idle.ring():
            super()._write_to_self()  # type: ignore[misc]

    def wake(self) -> None:
        """Wake the loop's thread (any thread)."""
        self._write_to_self()


class ActorThread:
    """Runs `handle(message)` for each enqueued message, one at a time, on a private loop."""

    def __init__(
        self, name: str, handle: Handler, on_exit: Callable[[], None] | None = None
    ) -> None:
        self.name = name
        self._handle = handle
        self._on_exit = on_exit
        self.loop = _ActorLoop()
        self.loop.idle.on_wake = self._wake
        self._queue: deque[Any] = deque()  # messages not yet handled, in arrival order
        self._waiter: asyncio.Future[None] | None = None  # set while the loop waits for mail
        self._sleeping = False  # True while the consumer waits; producers must wake it
        # What `_wake` handed to `_main`: an awaitable a handler returned, or STOP.
        self._handed: Any = None
        # The context `_main` runs in, which `_wake` runs handlers in too (what a handler sets
        # in a context variable, the message's rank say, is what the coroutine it returns sees).
        # None before Python 3.11, which cannot give a task its context: `_wake` then only
        # resumes `_main`.
        self._context: contextvars.Context | None = (
            contextvars.copy_context() if sys.version_info >= (3, 11) else None)
        self.stopped = threading.Event()  # set once the thread has finished
        # The task running `_main` (set once it starts): cancelling it while it awaits an async
        # handler cancels that handler (`HostedActor.cancel`).
        self.main_task: asyncio.Task[None] | None = None
        self.thread = threading.Thread(target=self._run, name=f"monarch-actor:{name}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def enqueue(self, message: Any) -> None:
        """Queue `message` (any thread)."""
        self._queue.append(message)
        if self._sleeping:
            self._sleeping = False
            self.loop.wake()  # `_wake` runs on the loop as it wakes up

    def queued(self) -> list[Any]:
        """A snapshot of the messages queued and not yet taken by the handler, in arrival
        order (any thread): what an actor that failed or ended still owes an answer to."""
        return list(self._queue)

    def _wake(self) -> None:
        """After each wait of the loop (its thread): if `_main` waits for mail and some came,
        handle it right here while the handlers are synchronous, in order; the first that
        returns an awaitable (an async endpoint), or STOP, goes to `_main`, which resumes and
        takes the rest. Resuming `_main` for every message cost a future, a scheduled step and
        a turn of the loop each time the actor was idle."""
        waiter = self._waiter
        q = self._queue
        if waiter is None or not q or waiter.done():
            return
        context = self._context
        if context is None:
            waiter.set_result(None)
            return
        while q:
            message = q.popleft()
            if message is STOP:
                self._handed = STOP
                waiter.set_result(None)
                return
            try:
                result = context.run(self._handle, message)
            except Exception:  # handlers report their own errors; this is a bug of ours
                logger.exception("monarch: actor %s failed to handle a message", self.name)
                result = None
            message = None  # (frees its arguments now, as `_main` does)
            if result is not None:
                self._handed = result
                waiter.set_result(None)
                return
            if not q:
                # `_main` still waits: the next message must wake the loop (the queue is
                # checked again after this, so one that came just now is handled here).
                self._sleeping = True

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            if self._context is not None:
                main = self.loop.create_task(self._main(), context=self._context)  # type: ignore[call-arg,unused-ignore]
                self.loop.run_until_complete(main)
            else:
                self.loop.run_until_complete(self._main())
        finally:
            try:
                _cancel_remaining(self.loop)
            finally:
                self.loop.close()
                self.stopped.set()
                if self._on_exit is not None:
                    self._on_exit()

    async def _main(self) -> None:
        self.main_task = asyncio.current_task()
        q = self._queue
        loop = self.loop
        while True:
            while not q and self._handed is None:
                self._waiter = loop.create_future()
                self._sleeping = True
                if q:
                    self._sleeping = False
                    break
                await self._waiter
            handed, self._handed = self._handed, None
            if handed is not None:  # from `_wake`: what a handler returned, or STOP
                if handed is STOP:
                    return
                try:
                    await handed
                except Exception:  # handlers report their own errors; this is a bug of ours
                    logger.exception("monarch: actor %s failed to handle a message", self.name)
                handed = None
                continue
            message = q.popleft()
            if message is STOP:
                return
            try:
                result = self._handle(message)
                if result is not None:
                    await result
            except Exception:  # handlers report their own errors; this is a bug of ours
                logger.exception("monarch: actor %s failed to handle a message", self.name)
            # Free the handled message's arguments now, not when the next message comes: a
            # large one pins a pooled receive buffer (transport/bufpool.py) until then.
            message = result = None


def _cancel_remaining(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
