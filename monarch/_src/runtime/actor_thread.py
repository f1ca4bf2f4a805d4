"""The thread, event loop and FIFO inbox behind each actor.

Each actor handles one message at a time in arrival order, async endpoints included: the loop
awaits each handler before taking the next message. Handlers that want concurrency
(`@concurrent_endpoint`, `__supervise__`) start tasks on this loop themselves. The loop is
long-lived, so asyncio objects an actor creates persist across messages.

The inbox is a deque filled from the process's runtime loop thread; the actor's loop is woken
only when it was idle, so a burst of messages costs one wake-up.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["STOP", "ActorThread"]

logger = logging.getLogger(__name__)

STOP: Any = object()  # enqueue this to end the thread after everything queued before it

Handler = Callable[[Any], "Awaitable[None] | None"]


class ActorThread:
    """Runs `handle(message)` for each enqueued message, one at a time, on a private loop."""

    def __init__(
        self, name: str, handle: Handler, on_exit: Callable[[], None] | None = None
    ) -> None:
        self.name = name
        self._handle = handle
        self._on_exit = on_exit
        self.loop = asyncio.new_event_loop()
        self._queue: deque[Any] = deque()  # messages not yet handled, in arrival order
        self._waiter: asyncio.Future[None] | None = None  # set while the loop waits for mail
        self._sleeping = False  # True while the consumer waits; producers must wake it
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
            try:
                self.loop.call_soon_threadsafe(self._wake)
            except RuntimeError:  # the loop already closed: the actor is gone
                pass

    def queued(self) -> list[Any]:
        """A snapshot of the messages queued and not yet taken by the handler, in arrival
        order (any thread): what an actor that failed or ended still owes an answer to."""
        return list(self._queue)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
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
            while not q:
                self._waiter = loop.create_future()
                self._sleeping = True
                if q:
                    self._sleeping = False
                    break
                await self._waiter
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
