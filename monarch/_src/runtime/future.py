"""`Future`: the handle every remote operation returns at once.

A Future wraps a `concurrent.futures.Future` completed by the runtime's loop thread, so `get()`
blocks any thread without needing an event loop, and `await` bridges into whatever loop the caller
runs. Neither consumes the result: both may be repeated in any order. The raw result may be
decoded lazily (a reply's payload is unpickled by the first reader, in the reader's thread, never
on the runtime loop); the decoded value or exception is cached.

Rejected alternative: an asyncio future owned by one loop. It cannot be awaited from an actor's
own loop or read from a Jupyter cell without re-entering the kernel's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
import warnings
from typing import Any, Callable, Generator, Generic, TypeVar

__all__ = ["Future"]

T = TypeVar("T")

logger = logging.getLogger(__name__)

_UNSET: Any = object()

_GET_IN_LOOP_WARNING = (
    "Future.get() was called from within an active event loop. This blocks the loop until the "
    "result arrives; use `await future` instead."
)


def _check_timeout(timeout: float | None) -> None:
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ValueError(f"Future timeout must be a number of seconds or None, not {timeout!r}.")
    if not math.isfinite(timeout) or timeout < 0:
        raise ValueError(f"Future timeout must be finite and non-negative, not {timeout!r}.")


class Future(Generic[T]):
    """The result of a remote operation, available later.

    Obtain one from an adverb (`call`, `call_one`, `choose`, ...), `stop()` or another API call;
    it cannot be constructed directly.
    """

    __slots__ = ("_cf", "_decode", "_map_error", "_lock", "_value", "_error")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "Future cannot be constructed directly. Futures are returned by monarch API calls "
            "such as `mesh.endpoint.call()`."
        )

    @classmethod
    def _create(
        cls,
        cf: concurrent.futures.Future[Any],
        decode: Callable[[Any], T] | None = None,
        map_error: Callable[[BaseException], BaseException] | None = None,
    ) -> Future[T]:
        fut = object.__new__(cls)
        fut._cf = cf  # completed by the runtime loop with a raw value or an exception
        fut._decode = decode  # applied once to the raw value by the first reader
        fut._map_error = map_error  # applied once to an exception the runtime set
        fut._lock = threading.Lock()
        fut._value = _UNSET  # decoded value, cached once known
        fut._error = None  # exception, cached once known
        return fut

    @classmethod
    def _from_value(cls, value: T) -> Future[T]:
        cf: concurrent.futures.Future[Any] = concurrent.futures.Future()
        cf.set_result(value)
        return cls._create(cf)

    @classmethod
    def _from_exception(cls, exc: BaseException) -> Future[Any]:
        cf: concurrent.futures.Future[Any] = concurrent.futures.Future()
        cf.set_exception(exc)
        return cls._create(cf)

    # ---- reading -------------------------------------------------------------------------
    def _settle(self) -> None:
        """Decode the finished raw result once; callers hold no lock."""
        with self._lock:
            if self._value is not _UNSET or self._error is not None:
                return
            exc = self._cf.exception()
            if exc is not None:
                self._error = exc if self._map_error is None else self._map_error(exc)
                return
            raw = self._cf.result()
            if self._decode is None:
                self._value = raw
                return
            try:
                self._value = self._decode(raw)
            except BaseException as e:  # a decode failure is the future's outcome
                self._error = e

    def _outcome(self) -> T:
        self._settle()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[no-any-return]

    def get(self, timeout: float | None = None) -> T:
        """Block until the result is known and return it, or raise its exception.

        A `TimeoutError` after `timeout` seconds does not consume the future.
        """
        _check_timeout(timeout)
        if _loop_running_here():
            # Warned whether or not the result is there yet: whether a call blocks the loop
            # must not depend on timing.
            warnings.warn(_GET_IN_LOOP_WARNING, UserWarning, stacklevel=2)
            logger.warning(_GET_IN_LOOP_WARNING)
        if not self._cf.done():
            try:
                # Waits on the future's own condition: cheaper than concurrent.futures.wait.
                self._cf.exception(timeout)
            except TimeoutError:
                raise TimeoutError(f"Future did not complete within {timeout} seconds.") from None
        return self._outcome()

    def result(self, timeout: float | None = None) -> T:
        """Alias of `get`."""
        return self.get(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Block like `get`, but return the exception (or None) instead of raising it."""
        _check_timeout(timeout)
        try:
            self.get(timeout)
        except TimeoutError:
            if not self._cf.done():
                raise
            self._settle()  # it completed just after the wait timed out
            return self._error
        except BaseException as e:
            return e
        return None

    def done(self) -> bool:
        """Whether the value or the exception is there (never blocks)."""
        return self._cf.done()

    # ---- asyncio -------------------------------------------------------------------------
    def as_asyncio(self) -> asyncio.Future[T]:
        """A fresh future on the running loop that completes with this one."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "Future.as_asyncio() needs a running asyncio event loop; use get() outside one."
            ) from None
        afut: asyncio.Future[T] = loop.create_future()

        def _copy(_: concurrent.futures.Future[Any]) -> None:
            if afut.done():
                return
            try:
                afut.set_result(self._outcome())
            except BaseException as e:
                afut.set_exception(e)

        if self._cf.done():
            _copy(self._cf)
        else:
            self._cf.add_done_callback(
                lambda cf: loop.call_soon_threadsafe(_copy, cf) if not loop.is_closed() else None
            )
        return afut

    def __await__(self) -> Generator[Any, None, T]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise ValueError(
                "__await__ with no active event loop: await this Future inside a coroutine, "
                "or call get() to block."
            ) from None
        if self._cf.done():
            return self._outcome()
        return (yield from self.as_asyncio().__await__())

    def add_done_callback(self, fn: Callable[[Future[T]], None]) -> None:
        """Call `fn(self)` when the future completes (on the completing thread)."""
        self._cf.add_done_callback(lambda _: fn(self))

    def __repr__(self) -> str:
        state = "done" if self._cf.done() else "pending"
        return f"<monarch.actor.Future {state}>"


def _loop_running_here() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
