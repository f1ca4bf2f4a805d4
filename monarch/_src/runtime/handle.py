"""`Handle`, an observe-only view of a background operation, and `WouldBlockRuntime`
(torchmonarch's `monarch_hyperactor.handle` names).

On Monarch the producer is a tokio task; here it is a `concurrent.futures.Future` completed by
whichever thread runs the operation (the pytokio loop of `pytokio.py`, or a caller holding the
completer of `new_handle_pair`). A Handle never drives work itself: it only observes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import warnings
from collections.abc import Generator
from typing import Any, Generic, TypeVar

__all__ = ["Handle", "WouldBlockRuntime", "in_runtime_thread", "mark_runtime_thread",
           "new_handle_pair"]

T = TypeVar("T")

# Threads that play the part of tokio's worker threads: blocking on them would stall every task
# they run, so the blocking APIs refuse there (`WouldBlockRuntime`), as Monarch's do.
_runtime_threads: set[int] = set()
_runtime_threads_lock = threading.Lock()

_PRODUCER_GONE = "The producer of this Handle ended before it published a result."


class WouldBlockRuntime(RuntimeError):
    """A synchronous API refused to block because the caller runs on the runtime's own thread
    (blocking there would stall everything that thread runs); use `poll()`, `await` or
    `as_asyncio()` there instead."""


def mark_runtime_thread(thread: threading.Thread) -> None:
    """Count `thread` as a runtime thread (where blocking calls raise `WouldBlockRuntime`)."""
    if thread.ident is None:
        raise ValueError(f"Thread {thread.name} has not started; start it before marking it.")
    with _runtime_threads_lock:
        _runtime_threads.add(thread.ident)


def in_runtime_thread() -> bool:
    """Whether the calling thread is one of the runtime's own threads."""
    from monarch._src.runtime.runtime import runtime_if_started

    ident = threading.get_ident()
    if ident in _runtime_threads:
        return True
    rt = runtime_if_started()
    if rt is None:
        return False
    # The runtime loop's thread is where monarch's own transport and control work runs: the
    # part tokio plays on Monarch. That thread only ever runs inside its loop.
    try:
        return asyncio.get_running_loop() is rt.loop
    except RuntimeError:
        return False


def _refuse_blocking(what: str) -> None:
    if in_runtime_thread():
        raise WouldBlockRuntime(
            f"{what} would block the runtime thread {threading.current_thread().name}. "
            "Use poll(), await or as_asyncio() there instead."
        )


class Handle(Generic[T]):
    """An observe-only handle to a background operation: it resolves once, and any number of
    observers may read it, in any order (nothing is consumed)."""

    __slots__ = ("_fut",)
    _fut: concurrent.futures.Future[T]  # completed once, by the producer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "Handle cannot be constructed directly; get one from PythonTask.spawn_handle() "
            "or new_handle_pair()."
        )

    @classmethod
    def _over(cls, fut: concurrent.futures.Future[T]) -> Handle[T]:
        handle: Handle[T] = object.__new__(cls)
        handle._fut = fut
        return handle

    def get(self, timeout: float | None = None) -> T:
        """Block until the handle resolves and return its value. Raises `WouldBlockRuntime` on a
        runtime thread; warns on a running asyncio loop; `TimeoutError` after `timeout` seconds
        without cancelling anything."""
        _refuse_blocking("Handle.get()")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # no running loop: blocking here is what the caller wants
        else:
            warnings.warn(
                "Handle.get() was called from a running asyncio event loop; it blocks the "
                "loop. Use await or as_asyncio() instead.",
                RuntimeWarning,
                stacklevel=2,
            )
        try:
            return self._fut.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"Handle.get() timed out after {timeout} seconds.") from None
        except concurrent.futures.CancelledError:
            raise RuntimeError(_PRODUCER_GONE) from None

    def concurrent_future(self) -> concurrent.futures.Future[T]:
        """The `concurrent.futures.Future` the producer completes (this implementation's, for
        waiting on a Handle together with other futures)."""
        return self._fut

    def poll(self) -> T | None:
        """The value if the handle has resolved (its exception raised if it failed), else None."""
        if not self._fut.done():
            return None
        if self._fut.cancelled():
            raise RuntimeError(_PRODUCER_GONE)
        return self._fut.result()

    def as_asyncio(self) -> asyncio.Future[T]:
        """An asyncio future of the running loop that resolves when the handle does."""
        loop = asyncio.get_running_loop()
        out: asyncio.Future[T] = loop.create_future()

        def copy(src: concurrent.futures.Future[T]) -> None:
            if out.done():
                return
            if src.cancelled():
                out.set_exception(RuntimeError(_PRODUCER_GONE))
            elif (exc := src.exception()) is not None:
                out.set_exception(exc)
            else:
                out.set_result(src.result())

        if self._fut.done():
            copy(self._fut)
        else:
            self._fut.add_done_callback(lambda src: loop.call_soon_threadsafe(copy, src))
        return out

    def __await__(self) -> Generator[Any, None, T]:
        return self.as_asyncio().__await__()

    def __repr__(self) -> str:
        state = "resolved" if self._fut.done() else "pending"
        return f"<Handle {state}>"


class _HandleCompleter(Generic[T]):
    """The one producer side of a pending `Handle`: the first outcome set wins."""

    __slots__ = ("_fut",)

    def __init__(self, fut: concurrent.futures.Future[T]) -> None:
        self._fut = fut

    def set_result(self, value: T) -> None:
        if not self._fut.done():
            self._fut.set_result(value)

    def set_exception(self, error: BaseException) -> None:
        if not self._fut.done():
            self._fut.set_exception(error)

    def __del__(self) -> None:
        # A producer dropped without an outcome: every observer raises RuntimeError.
        if not self._fut.done():
            self._fut.cancel()


def new_handle_pair() -> tuple[Handle[Any], _HandleCompleter[Any]]:
    """A pending `Handle` and its sole completer."""
    fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
    return Handle._over(fut), _HandleCompleter(fut)
