"""`Completion`: a `concurrent.futures.Future` that is cheap to make and to keep.

Every call's reply port holds one, and a caller may keep thousands of them in flight (W3 issues
10,000 calls before reading any). The standard future allocates a `Condition` (an `RLock`, a
deque, bound methods) and two lists per instance: about ten objects the garbage collector must
track, which made the collector's full passes, not the calls, the largest cost of issuing a call
(measured: 57-85 us per `call_one` with the collector on, 22 us with it off). A `Completion` is
one object: state changes of all completions go through one module lock (held for a few
bytecodes, never while waiting or running callbacks), and a thread that blocks on one gets its
own lock, made only then, which the completing thread releases.

It is a subclass, so `asyncio.wrap_future`, `add_done_callback` and the `result`/`exception`
timeouts work as on the standard future. Not supported: `concurrent.futures.wait` and
`as_completed`, which reach into the standard future's condition (nothing in monarch uses them on
these futures; they raise `TypeError`).
"""

from __future__ import annotations

import _thread
import concurrent.futures
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["Completion"]

logger = logging.getLogger(__name__)

# The states of `concurrent.futures.Future` (its `_state` values, which asyncio's bridge reads
# through the public methods only).
_PENDING = "PENDING"
_RUNNING = "RUNNING"
_CANCELLED = "CANCELLED"
_NOTIFIED = "CANCELLED_AND_NOTIFIED"
_FINISHED = "FINISHED"
_DONE = (_CANCELLED, _NOTIFIED, _FINISHED)

_lock = _thread.allocate_lock()  # guards the state, blocked threads and callbacks of them all


class Completion(concurrent.futures.Future[Any]):
    """A light `concurrent.futures.Future` (see the module docstring)."""

    # A new completion's state is these class attributes: an instance gets its own as they
    # change, and making one runs no Python code (the base initializer would make the Condition).
    _state = _PENDING
    _result: Any = None
    _exception: BaseException | None = None
    _blocked: list[Any] | None = None  # locks of threads waiting in result()/exception()
    _callbacks: list[Callable[[Any], Any]] | None = None
    __init__ = object.__init__

    def __getattr__(self, name: str) -> Any:
        # Only what the standard future's initializer would have set is missing here.
        if name in ("_condition", "_waiters", "_done_callbacks"):
            raise TypeError(
                "monarch's Completion futures do not support concurrent.futures.wait or "
                "as_completed; wait on each future (result()) or use asyncio.wrap_future."
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ---- completing -----------------------------------------------------------------------
    def _finish(self, state: str, result: Any, exc: BaseException | None) -> bool:
        with _lock:
            if self._state in _DONE or (state == _CANCELLED and self._state == _RUNNING):
                return False
            self._state, self._result, self._exception = state, result, exc
            blocked, self._blocked = self._blocked, None
            callbacks, self._callbacks = self._callbacks, None
        if blocked is not None:
            for waiter in blocked:
                waiter.release()
        if callbacks is not None:
            for callback in callbacks:
                self._run(callback)
        return True

    def finish_value(self, result: Any) -> bool:
        """Complete with `result` unless done already (cancelled): `set_result` without the
        `InvalidStateError`."""
        return self._finish(_FINISHED, result, None)

    def set_result(self, result: Any) -> None:
        if not self._finish(_FINISHED, result, None):
            raise concurrent.futures.InvalidStateError(f"{self._state}: {self!r}")

    def set_exception(self, exception: BaseException | None) -> None:
        if not self._finish(_FINISHED, None, exception):
            raise concurrent.futures.InvalidStateError(f"{self._state}: {self!r}")

    def cancel(self) -> bool:
        return self._finish(_CANCELLED, None, None) or self.cancelled()

    def set_running_or_notify_cancel(self) -> bool:
        with _lock:
            if self._state == _CANCELLED:
                self._state = _NOTIFIED
                return False
            if self._state == _PENDING:
                self._state = _RUNNING
                return True
        raise RuntimeError(f"Future in unexpected state: {self._state}")

    # ---- reading --------------------------------------------------------------------------
    def cancelled(self) -> bool:
        return self._state == _CANCELLED or self._state == _NOTIFIED

    def running(self) -> bool:
        return self._state == _RUNNING

    def done(self) -> bool:
        return self._state in _DONE

    def _wait(self, timeout: float | None) -> None:
        """Block until done; `TimeoutError` after `timeout` seconds."""
        if self._state in _DONE:
            return
        with _lock:
            if self._state in _DONE:
                return
            waiter = _thread.allocate_lock()
            waiter.acquire()
            if self._blocked is None:
                self._blocked = [waiter]
            else:
                self._blocked.append(waiter)
        try:
            got = waiter.acquire(True, -1 if timeout is None else timeout)
        finally:
            if self._state not in _DONE:  # gave up (timeout, or an interrupt): stop waiting
                with _lock:
                    if self._blocked is not None and waiter in self._blocked:
                        self._blocked.remove(waiter)
        if not got and self._state not in _DONE:
            raise TimeoutError()

    def result(self, timeout: float | None = None) -> Any:
        self._wait(timeout)
        if self._state != _FINISHED:
            raise concurrent.futures.CancelledError()
        if self._exception is not None:
            raise self._exception
        return self._result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        if self._state != _FINISHED:
            raise concurrent.futures.CancelledError()
        return self._exception

    def outcome(self) -> tuple[BaseException | None, Any] | None:
        """(exception, result) once finished, or None if cancelled; waits until done. A reader's
        one call where `cancelled`, `exception` and `result` take three."""
        if self._state != _FINISHED:
            if self._state not in _DONE:
                self._wait(None)
            if self._state != _FINISHED:
                return None
        return self._exception, self._result

    def add_done_callback(self, fn: Callable[[Any], Any]) -> None:
        with _lock:
            if self._state not in _DONE:
                if self._callbacks is None:
                    self._callbacks = [fn]
                else:
                    self._callbacks.append(fn)
                return
        self._run(fn)

    def _run(self, callback: Callable[[Any], Any]) -> None:
        try:
            callback(self)
        except Exception:  # as the standard future does: a callback's error is logged
            logger.exception("exception calling callback for %r", self)

    def __repr__(self) -> str:
        state = self._state
        if state == _FINISHED:
            if self._exception is not None:
                return f"<Completion at {id(self):#x} state=finished raised " \
                       f"{type(self._exception).__name__}>"
            return f"<Completion at {id(self):#x} state=finished returned " \
                   f"{type(self._result).__name__}>"
        return f"<Completion at {id(self):#x} state={state.lower()}>"
