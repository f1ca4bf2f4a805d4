"""`PythonTask` and `Shared` (torchmonarch's `monarch_hyperactor.pytokio` names): coroutines on
a loop thread of their own.

On Monarch a `PythonTask` is a tokio future and its coroutine runs on the tokio runtime. Here the
runtime is one daemon thread running an asyncio loop, started on first use ("monarch-pytokio";
it starts no mailbox, no transport). A `PythonTask` is a not-yet-started coroutine factory:
`block_on()` runs it there and waits, `spawn()` starts it there and returns a `Shared` (a result
any number of observers may read), `spawn_handle()` the same as an observe-only `Handle`.
Awaiting a `PythonTask` inside another task's coroutine runs it inline, as on Monarch; awaiting
it on any other asyncio loop (an actor's) raises RuntimeError, as on Monarch: spawn it and await
the `Shared`, or wrap it with `Future._from_coro`. Blocking calls on the pytokio thread raise
`WouldBlockRuntime`.

Rejected alternative: running tasks on monarch's own runtime loop. A task that blocks would then
stall every message of the process, where here it stalls only other pytokio tasks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Generator, Sequence
from typing import Any, Generic, TypeVar

from monarch._src.runtime.handle import (
    Handle,
    WouldBlockRuntime,
    in_runtime_thread,
    mark_runtime_thread,
)

__all__ = ["Handle", "PythonTask", "Shared", "WouldBlockRuntime", "is_tokio_thread"]

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None  # the pytokio loop; None until first use
_loop_lock = threading.Lock()
_blocking_pool: concurrent.futures.ThreadPoolExecutor | None = None  # for spawn_blocking


def _runtime_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            started = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(started.set)
                loop.run_forever()

            thread = threading.Thread(target=run, name="monarch-pytokio", daemon=True)
            thread.start()
            started.wait()
            mark_runtime_thread(thread)
            _loop = loop
        return _loop


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _blocking_pool
    with _loop_lock:
        if _blocking_pool is None:
            _blocking_pool = concurrent.futures.ThreadPoolExecutor(
                thread_name_prefix="monarch-pytokio-blocking"
            )
        return _blocking_pool


def is_tokio_thread() -> bool:
    """Whether the calling thread is one of the runtime's threads (where blocking is refused)."""
    return in_runtime_thread()


def _on_loop() -> bool:
    try:
        return asyncio.get_running_loop() is _loop
    except RuntimeError:
        return False


class PythonTask(Generic[T]):
    """A coroutine not started yet, to be run on the pytokio runtime; used once."""

    __slots__ = ("_coro",)
    _coro: Coroutine[Any, Any, T] | None  # None once the task was run

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "PythonTask cannot be constructed directly; use PythonTask.from_coroutine(coro)."
        )

    @staticmethod
    def from_coroutine(coro: Coroutine[Any, Any, T]) -> PythonTask[T]:
        """A task that runs `coro` (nothing runs until the task is awaited, blocked on or
        spawned)."""
        if not asyncio.iscoroutine(coro):
            raise TypeError(
                f"PythonTask.from_coroutine() takes a coroutine, not {type(coro).__name__}."
            )
        task: PythonTask[T] = object.__new__(PythonTask)
        task._coro = coro
        return task

    def _take(self) -> Coroutine[Any, Any, T]:
        coro = self._coro
        if coro is None:
            raise ValueError("This PythonTask was already used; a PythonTask runs once.")
        self._coro = None
        return coro

    def _start(self) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(self._take(), _runtime_loop())

    def block_on(self) -> T:
        """Run the task on the runtime and wait for its result (consumes the task)."""
        if in_runtime_thread():
            # The task is consumed either way, as on Monarch: its coroutine will never run.
            self._take().close()
            raise WouldBlockRuntime(
                f"PythonTask.block_on() would block the runtime thread "
                f"{threading.current_thread().name}. Await the task there instead."
            )
        return self._start().result()

    def spawn(self) -> Shared[T]:
        """Start the task now; its result can be read any number of times."""
        return Shared._over(self._start())

    def spawn_handle(self) -> Handle[T]:
        """Start the task now; an observe-only `Handle` on its result."""
        return Handle._over(self._start())

    @staticmethod
    def spawn_blocking(fn: Callable[[], T]) -> Shared[T]:
        """Run the plain function `fn` on a thread of its own, where it may block."""
        return Shared._over(_pool().submit(fn))

    def with_timeout(self, seconds: float) -> PythonTask[T]:
        """This task, failing with `TimeoutError` if not finished within `seconds`."""
        return PythonTask.from_coroutine(asyncio.wait_for(_awaitable(self._take()), seconds))

    @staticmethod
    def select_one(tasks: Sequence[PythonTask[T]]) -> PythonTask[tuple[T, int]]:
        """Run `tasks` concurrently; the result of the first to finish and its index (the
        others are cancelled)."""
        coros = [t._take() for t in tasks]
        if not coros:
            raise ValueError("PythonTask.select_one() needs at least one task.")

        async def first() -> tuple[T, int]:
            running = [asyncio.ensure_future(c) for c in coros]
            try:
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                index = min(running.index(t) for t in done)
                return running[index].result(), index
            finally:
                for t in running:
                    t.cancel()

        return PythonTask.from_coroutine(first())

    @staticmethod
    def sleep(seconds: float) -> PythonTask[None]:
        """A task that finishes after `seconds`."""
        return PythonTask.from_coroutine(asyncio.sleep(seconds))

    def __await__(self) -> Generator[Any, None, T]:
        if _on_loop():
            return self._take().__await__()
        # As on Monarch: a task is awaited only inside another task; on any other asyncio loop
        # (an actor's endpoint, a notebook) spawn it, or wrap it with Future._from_coro. The task
        # is spent (its coroutine closed, so no "never awaited" warning follows the error).
        self._take().close()
        raise RuntimeError(
            "Attempting to __await__ a PythonTask when the asyncio event loop is active. "
            "PythonTask objects should only be awaited in coroutines passed to "
            "PythonTask.from_coroutine (or await task.spawn(), or "
            "Future._from_coro(task))."
        )

    def __repr__(self) -> str:
        return f"<PythonTask {'used' if self._coro is None else 'not started'}>"


async def _awaitable(coro: Coroutine[Any, Any, T]) -> T:
    return await coro


class Shared(Generic[T]):
    """The result of a spawned task: awaited, blocked on or polled any number of times."""

    __slots__ = ("_fut",)
    _fut: concurrent.futures.Future[T]  # completed once, by the task

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "Shared cannot be constructed directly; use PythonTask.spawn() or "
            "Shared.from_value(value)."
        )

    @classmethod
    def _over(cls, fut: concurrent.futures.Future[T]) -> Shared[T]:
        shared: Shared[T] = object.__new__(cls)
        shared._fut = fut
        return shared

    @classmethod
    def from_concurrent(cls, fut: concurrent.futures.Future[T]) -> Shared[T]:
        """A `Shared` of `fut`, completed by whatever completes it."""
        return cls._over(fut)

    @classmethod
    def from_value(cls, value: T) -> Shared[T]:
        """A `Shared` already completed with `value`."""
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        fut.set_result(value)
        return cls._over(fut)

    def block_on(self) -> T:
        """Wait for the result (raises `WouldBlockRuntime` on a runtime thread)."""
        if not self._fut.done() and in_runtime_thread():
            raise WouldBlockRuntime(
                f"Shared.block_on() would block the runtime thread "
                f"{threading.current_thread().name}. Await it there instead."
            )
        return self._fut.result()

    def poll(self) -> T | None:
        """The result if the task finished (its exception raised if it failed), else None."""
        return self._fut.result() if self._fut.done() else None

    def task(self) -> PythonTask[T]:
        """A one-use task that waits for this result (to use `with_timeout` and friends)."""

        async def wait() -> T:
            return await self

        return PythonTask.from_coroutine(wait())

    def __await__(self) -> Generator[Any, None, T]:
        return asyncio.wrap_future(self._fut).__await__()

    def __repr__(self) -> str:
        return f"<Shared {'done' if self._fut.done() else 'pending'}>"
