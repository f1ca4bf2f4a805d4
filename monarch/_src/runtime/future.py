"""`Future`: the handle every remote operation returns at once.

A Future wraps a `concurrent.futures.Future` completed by the runtime's loop thread, so `get()`
blocks any thread without needing an event loop, and `await` bridges into whatever loop the caller
runs. Neither consumes the result: both may be repeated in any order. The raw result may be
decoded lazily (a reply's payload is unpickled by the first reader, in the reader's thread, never
on the runtime loop); the decoded value or exception is cached.

A Future made by an endpoint call can be cancelled (`cancel()`): it fails at once with
`concurrent.futures.CancelledError` and the actors are told to drop the call (queued) or stop
it (running; `HostedActor.cancel` says how). A `KeyboardInterrupt` while a thread waits in
`get()`/`wait()`, or while a task awaits it, cancels it the same way and is raised again as
`Interrupted`, a `KeyboardInterrupt` that says what was cancelled (a notebook shows that one
line: `monarch.notebook.interrupt`). A task awaiting it that is cancelled cancels it too, as
asyncio does with what a cancelled task awaits; a `get(timeout)` that times out does not.

Rejected alternative: an asyncio future owned by one loop. It cannot be awaited from an actor's
own loop or read from a Jupyter cell without re-entering the kernel's loop.

Reads follow torchmonarch's paths, which decide its warnings and timeout checks: a first plain
`get()` caches the outcome (later reads check no timeout and never warn); once awaited, converted
with `as_asyncio()` or read with a timeout, reads take the handle path (its timeout wording, its
in-loop warning); `exception()` returns what `get()` would raise, a timeout included.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
import warnings
import weakref
from collections.abc import Callable, Generator
from typing import Any, Generic, Protocol, TypeVar

from monarch._src.runtime.completion import Completion
from monarch._src.runtime.hook import Slot

__all__ = [
    "GET_IN_LOOP_WARNING",
    "Future",
    "Interrupted",
    "WaitHook",
    "blocking_warned_here",
    "check_timeout",
    "loop_running_here",
    "on_wait",
    "quiet_blocking_on",
]

T = TypeVar("T")
U = TypeVar("U")

logger = logging.getLogger(__name__)

_UNSET: Any = object()
# Guards every Future's `_lock` field, for a few bytecodes: the reader that finds it None
# decodes (`_settle`), one that comes meanwhile makes the lock it waits on.
_LOCKS = threading.Lock()
_DECODING: Any = object()  # `_lock` while a reader decodes and no other waits for it
# A timeout of type float or int from 0 to this passes `check_timeout` and `_check_duration`
# (NaN, infinities and ints too large for a float do not compare in range).
_PLAIN_TIMEOUT = 1e300
_running_loop = asyncio._get_running_loop

# Torchmonarch words the in-loop warning differently for a future nobody observed yet (the
# first blocking read) and for one already observed through a handle (awaited, converted with
# as_asyncio(), or read with a timeout); both texts are kept so programs that match on them run.
# GET_IN_LOOP_WARNING is also what other blocking reads (`wait`, `returns_future`) warn with.
GET_IN_LOOP_WARNING = (
    "Future.get() was called from within an active event loop. Because this method blocks "
    "synchronously and does not yield control, it may degrade performance by preventing "
    "other tasks from running, and can potentially cause deadlocks if this future depends "
    "on them. It is encouraged to use as_asyncio() (or await) instead."
)
_OBSERVED_GET_IN_LOOP_WARNING = (
    "Blocking get() was called from a running asyncio event loop. It is a synchronous, "
    "blocking call that can freeze the loop and deadlock; use as_asyncio() (or await) instead."
)
_GET_IN_LOOP_LOG = "Future.get() called from within an active event loop"


class Interrupted(KeyboardInterrupt):
    """The `KeyboardInterrupt` raised by a wait on a Future that it cancelled; its text says
    what was cancelled (`except KeyboardInterrupt` catches it as before)."""


def check_timeout(timeout: float | None) -> None:
    """The first read's check of a timeout: a number of seconds, finite and non-negative (or
    None); raises `ValueError` with torchmonarch's wording otherwise."""
    if timeout is not None and (not math.isfinite(timeout) or timeout < 0):
        raise ValueError(
            f"invalid timeout {timeout}: expected a non-negative, finite number of seconds"
        )


def _check_duration(timeout: float) -> None:
    """An observed future's check, worded as torchmonarch's conversion to a duration is."""
    seconds = float(timeout)  # a non-number raises TypeError here, as torchmonarch does
    if math.isnan(seconds) or math.isinf(seconds):
        shown = "NaN" if math.isnan(seconds) else ("-inf" if seconds < 0 else "inf")
        if seconds < 0:
            raise ValueError(
                f"invalid timeout {shown}: cannot convert float seconds to Duration: value is "
                "negative"
            )
        raise ValueError(
            f"invalid timeout {shown}: cannot convert float seconds to Duration: value is "
            "either too big or NaN"
        )
    if seconds < 0:
        shown = str(int(seconds)) if seconds.is_integer() else repr(seconds)
        raise ValueError(
            f"invalid timeout {shown}: cannot convert float seconds to Duration: value is "
            "negative"
        )


class Future(Generic[T]):
    """The result of a remote operation, available later.

    Obtain one from an adverb (`call`, `call_one`, `choose`, ...), `stop()` or another API call;
    it cannot be constructed directly.
    """

    __slots__ = (
        "_cancel",
        "_cf",
        "_complete",
        "_decode",
        "_error",
        "_lock",
        "_map_error",
        "_observed",
        "_value",
    )
    _cf: concurrent.futures.Future[Any]
    _decode: Callable[[Any], T] | None
    _map_error: Callable[[BaseException], BaseException] | None
    _lock: Any  # None, `_DECODING`, or the lock that readers waiting for the decoder block on
    _value: Any  # T once known, `_UNSET` before
    _error: BaseException | None
    _observed: bool
    _complete: bool
    _cancel: Callable[[], str] | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "Future objects are returned by Monarch operations and cannot be constructed "
            "directly."
        )

    @classmethod
    def from_concurrent(
        cls,
        cf: concurrent.futures.Future[Any],
        decode: Callable[[Any], T] | None = None,
        map_error: Callable[[BaseException], BaseException] | None = None,
        cancel: Callable[[], str] | None = None,
    ) -> Future[T]:
        """The Future of `cf`, which the runtime completes with a raw result or an exception.

        `decode(raw)` makes the value, once, in the first reader's thread (a reply's payload is
        unpickled there, never on the runtime loop); an exception it raises is the outcome.
        `map_error(exc)` turns an exception set on `cf` into the one readers see, once.
        `cancel()`, called at most once by `Future.cancel` after `cf` was cancelled, withdraws
        the work behind it (the calls) and returns what it cancelled, in a few words ("the call
        to counter.incr on 2 ranks"); without it the Future cannot be cancelled.
        """
        fut = object.__new__(cls)
        fut._cf = cf  # completed by the runtime loop with a raw value or an exception
        fut._decode = decode  # applied once to the raw value by the first reader
        fut._map_error = map_error  # applied once to an exception the runtime set
        fut._lock = None  # see `_settle`
        fut._value = _UNSET  # decoded value, cached once known
        fut._error = None  # exception, cached once known
        # Torchmonarch's read paths, which decide its warnings and timeout checks: True once
        # the future was awaited, converted with as_asyncio() or read with a timeout.
        fut._observed = False
        # True once a plain get() (no timeout, not observed) finished: later reads return the
        # cached outcome without checking the timeout or warning.
        fut._complete = False
        fut._cancel = cancel
        return fut

    @classmethod
    def _from_coro(cls, coro: Any) -> Future[Any]:
        """torchmonarch's `Future._from_coro`: the Future of `coro`, a coroutine (run on the
        runtime loop) or a `PythonTask` (run on the pytokio loop)."""
        from monarch._src.runtime.pytokio import PythonTask

        if isinstance(coro, PythonTask):
            return cls.from_concurrent(coro._start())
        if not asyncio.iscoroutine(coro):
            raise TypeError(
                f"Future._from_coro takes a coroutine or a PythonTask, got "
                f"{type(coro).__name__}."
            )
        from monarch._src.runtime.runtime import get_runtime

        return cls.from_concurrent(get_runtime().submit(coro))

    @classmethod
    def from_value(cls, value: T) -> Future[T]:
        """A Future already done with `value`."""
        cf: concurrent.futures.Future[Any] = Completion()
        cf.set_result(value)
        return cls.from_concurrent(cf)

    @classmethod
    def from_exception(cls, exc: BaseException) -> Future[Any]:
        """A Future already failed with `exc`."""
        cf: concurrent.futures.Future[Any] = Completion()
        cf.set_exception(exc)
        return cls.from_concurrent(cf)

    def map(self, fn: Callable[[T], U]) -> Future[U]:
        """A Future of `fn(value)`, done when this one is.

        `fn` runs once, in the first reader's thread, on this future's (cached) value; an
        exception it raises is the new future's outcome. This future's error passes through
        unchanged (the very same exception object).
        """

        def apply(_raw: Any) -> U:
            return fn(self._outcome())

        def same_error(_exc: BaseException) -> BaseException:
            self._settle()
            assert self._error is not None
            return self._error

        return Future.from_concurrent(self._cf, apply, same_error, self._canceller())

    # ---- what subclasses may change ------------------------------------------------------
    def _decode_raw(self, raw: Any) -> T:
        """The value of the raw result (`decode`, if given); may raise, which is the outcome."""
        return raw if self._decode is None else self._decode(raw)

    def _canceller(self) -> Callable[[], str] | None:
        """What withdraws the work behind this future (`cancel`), if anything does; None once
        it was cancelled (`_cancel` is set to None then)."""
        return self._cancel

    # ---- reading -------------------------------------------------------------------------
    def _settle(self) -> None:
        """Decode the finished raw result once; callers hold no lock.

        The first reader decodes. No lock is made for a future that one thread reads (nearly
        all of them: each would cost an allocation, and an object the collector tracks); a
        reader that comes while another decodes makes one and waits on it."""
        while self._value is _UNSET and self._error is None:
            with _LOCKS:
                if self._value is not _UNSET or self._error is not None:
                    return
                lock = self._lock
                if lock is None:
                    self._lock = _DECODING
                elif lock is _DECODING:
                    lock = self._lock = threading.Lock()
                    lock.acquire()  # released by the decoder once it is done
            if lock is None:
                self._decode_now()
                return
            lock.acquire()  # the decoder is done: pass it on to the next waiter, if any
            lock.release()

    def _decode_now(self) -> None:
        """Work out the outcome (`_settle`'s claimed reader) and publish it."""
        value: Any = _UNSET
        error: BaseException | None = None
        try:
            cf = self._cf
            if isinstance(cf, Completion):  # one call, not three
                outcome = cf.outcome()
            elif cf.cancelled():
                outcome = None
            else:
                exc = cf.exception()
                outcome = (exc, None if exc is not None else cf.result())
            if outcome is None:
                error = concurrent.futures.CancelledError("the call was cancelled")
                return
            exc, raw = outcome
            if exc is not None:
                error = exc if self._map_error is None else self._map_error(exc)
                return
            try:
                value = self._decode_raw(raw)
            except BaseException as e:  # a decode failure is the future's outcome
                error = e
        finally:
            # Anything raised past this (an interrupt) leaves it undecoded: a waiter retries.
            with _LOCKS:
                self._value, self._error = value, error
                lock, self._lock = self._lock, None
            if lock is not _DECODING:
                lock.release()

    def _outcome(self) -> T:
        value = self._value
        if value is _UNSET:
            self._settle()
            if self._error is not None:
                raise self._error
            value = self._value
        return value  # type: ignore[no-any-return]

    def get(self, timeout: float | None = None) -> T:
        """Block until the result is known and return it, or raise its exception.

        A `TimeoutError` after `timeout` seconds does not consume the future. Inside a running
        event loop this warns (it blocks the loop): use `await` there.
        """
        # Outside a loop (nearly every get) `blocking_warned_here` needs no call.
        in_loop = _running_loop() is not None and blocking_warned_here()
        if in_loop:
            logger.warning(_GET_IN_LOOP_LOG)
        if self._complete:
            return self._outcome()
        if self._observed or timeout is not None:
            # A float or int in range passes both timeout checks: their calls are skipped.
            plain = ((type(timeout) is float or type(timeout) is int)
                     and 0 <= timeout <= _PLAIN_TIMEOUT)
            if not self._observed:
                if not plain:
                    check_timeout(timeout)
                self._observed = True
            return self._observed_get(timeout, in_loop, plain)
        if in_loop:
            # Warned whether or not the result is there yet: whether a call blocks the loop
            # must not depend on timing.
            warnings.warn(GET_IN_LOOP_WARNING, UserWarning, stacklevel=2)
        if not self._cf.done():
            self._wait(None)
        self._complete = True
        return self._outcome()

    def _observed_get(self, timeout: float | None, in_loop: bool, plain: bool) -> T:
        if timeout is not None and not plain:
            _check_duration(timeout)
        if in_loop:
            warnings.warn(_OBSERVED_GET_IN_LOOP_WARNING, UserWarning, stacklevel=3)
        if not self._cf.done():
            try:
                self._wait(timeout)
            except TimeoutError:
                if not self._cf.done():  # else it completed just as the wait gave up
                    raise TimeoutError() from None
        return self._outcome()

    def _wait(self, timeout: float | None) -> None:
        """Wait until done (`TimeoutError` after `timeout`); an interrupt cancels this future
        and is raised again as `Interrupted`."""
        hook = on_wait.get() if not self._cf.done() else None  # only a wait that blocks is told
        if hook is not None:
            hook(self)
        try:
            self._cf.exception(timeout)  # waits on the future's own condition
        except concurrent.futures.CancelledError:
            pass  # done: the caller reads the outcome (cancelled) from the future itself
        except KeyboardInterrupt:
            self._raise_cancelled()
            raise
        finally:
            if hook is not None:
                hook(None)

    def _raise_cancelled(self) -> None:
        """On a `KeyboardInterrupt` while waiting: cancel this future and raise `Interrupted`
        saying what was cancelled; return (the caller re-raises the interrupt) if nothing was."""
        what = self._cancel_for_interrupt()
        if what is not None:
            raise Interrupted(f"cancelled {what}") from None

    def _cancel_for_interrupt(self) -> str | None:
        """Cancel on an interrupt; what was cancelled, or None if nothing was."""
        cancel = self._canceller()
        if cancel is None or not self._cf.cancel():
            return None
        self._cancel = None  # once: `_canceller()` is None from now on
        return cancel()

    def wait(self, timeout: float | None = None, *, quiet: bool = False) -> None:
        """Block until this future is done, without raising its error (read it afterwards with
        `get()` or `outcome()`).

        Raises `TimeoutError` if it is not done within `timeout` seconds (nothing is consumed)
        and `ValueError` for a timeout that is not a finite, non-negative number. Inside a
        running event loop it warns as `get()` does, since it blocks the loop; `quiet=True` is
        for callers whose very point is to block (`inspect()` in a notebook cell).
        """
        check_timeout(timeout)
        if not quiet and blocking_warned_here():
            logger.warning(_GET_IN_LOOP_LOG)
            warnings.warn(GET_IN_LOOP_WARNING, UserWarning, stacklevel=2)
        if self._cf.done():
            return
        try:
            self._wait(timeout)
        except TimeoutError:
            if not self._cf.done():  # else it completed just as the wait gave up
                raise TimeoutError(f"The future was not done within {timeout} seconds.") from None

    def outcome(self) -> T:
        """The value of a future that is done, or raise its error; never blocks nor warns.

        For code that knows the future is done: after `wait()`, in a done callback, in a `map`
        function over another future. Raises `RuntimeError` if it is not done yet.
        """
        if not self._cf.done():
            raise RuntimeError("Future.outcome() was called before the future was done.")
        return self._outcome()

    def result(self, timeout: float | None = None) -> T:
        """Alias of `get`."""
        return self.get(timeout)

    def exception(self, timeout: float | None = None) -> Exception | None:
        """Block like `get`, but return the exception (or None) instead of raising it.

        Whatever `get` would raise is returned, a `TimeoutError` or a bad timeout's
        `ValueError` included.
        """
        try:
            self.get(timeout)
        except Exception as e:
            return e
        return None

    def done(self) -> bool:
        """Whether the value or the exception is there (never blocks)."""
        return self._cf.done()

    def cancel(self) -> bool:
        """Cancel the calls behind this future: True if it was cancelled, False if it was done
        already or cannot be cancelled (it did not come from an endpoint call).

        Readers get `concurrent.futures.CancelledError` at once. Each actor drops the call if
        it is still queued, or interrupts it if it is running: an async endpoint gets
        `asyncio.CancelledError` at its next `await`; a sync one sees `context().cancelled`
        (`check_cancelled()` raises) and, if it goes on, is interrupted when that is safe
        (`HostedActor.cancel`). The actors keep serving; the replies are dropped.
        """
        return self._cancel_for_interrupt() is not None

    def cancelled(self) -> bool:
        """Whether `cancel()` cancelled this future."""
        return self._cf.cancelled()

    # ---- asyncio -------------------------------------------------------------------------
    def as_asyncio(self) -> asyncio.Future[T]:
        """A fresh future on the running loop that completes with this one."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("as_asyncio() requires a running asyncio event loop.") from None
        if not self._complete:
            self._observed = True
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
                "__await__ with no active event loop (either asyncio or tokio)"
            ) from None
        if self._cf.done():
            if not self._complete:
                self._observed = True
            return self._outcome()
        try:
            return (yield from self.as_asyncio().__await__())
        except asyncio.CancelledError:
            # The awaiting task was cancelled: as asyncio does with what a cancelled task
            # awaits, the calls are cancelled too.
            self.cancel()
            raise
        except KeyboardInterrupt:
            self._raise_cancelled()
            raise

    def add_done_callback(self, fn: Callable[[Future[T]], None]) -> None:
        """Call `fn(self)` when the future completes (on the completing thread)."""
        self._cf.add_done_callback(lambda _: fn(self))

    def __repr__(self) -> str:
        # torchmonarch's Future keeps object's repr; its class lives at this path there.
        return f"<monarch._src.actor.future.Future object at {id(self):#x}>"


def loop_running_here() -> bool:
    """Whether an asyncio event loop runs on the calling thread (where blocking would stall it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class WaitHook(Protocol):
    """`on_wait`'s value: `hook(future)` on the thread about to block on `future`, and
    `hook(None)` on it when the wait ends (whatever ended it). It must not block."""

    def __call__(self, future: Future[Any] | None, /) -> None: ...


#: Told what each blocking wait waits for: the mesh layer uses it to cancel what a cancelled
#: sync endpoint waits for (`mesh/cancellation.py` installs it).
on_wait: Slot[WaitHook] = Slot("on_wait", "Told what a thread blocks on, and when it stops.")

# Loops whose thread is expected to block while they run (see `quiet_blocking_on`).
_QUIET_LOOPS: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def quiet_blocking_on(loop: asyncio.AbstractEventLoop) -> None:
    """Do not warn about blocking reads on `loop`'s thread while it runs: a Jupyter kernel runs
    every cell's code on its event loop, and a cell that blocks blocks it anyway (the notebook
    registers the kernel's loop)."""
    _QUIET_LOOPS.add(loop)


def blocking_warned_here() -> bool:
    """Whether a blocking read here gets the in-loop warning: a loop runs on this thread and it
    is not one registered with `quiet_blocking_on`."""
    loop = asyncio._get_running_loop()  # None outside a loop, without raising (every get())
    return loop is not None and loop not in _QUIET_LOOPS
