"""`returns_future`: an `async def` that returns a monarch `Future` instead of a coroutine.

One implementation then serves both kinds of caller: synchronous code calls `.get()`, asyncio
code `await`s. Calling the decorated function only prepares the body (it makes sure monarch's
context exists and copies the caller's context variables); the body runs when the Future is
first observed, and at most once:

* `await fut` (or `fut.as_asyncio()`) runs it as a task on the awaiting loop;
* `fut.get()` runs it to completion on a fresh event loop of the calling thread, as
  `asyncio.run` does; if a loop already runs on this thread, on a short-lived helper thread. A
  `timeout` that passes cancels the body and the Future fails with `TimeoutError`.

Every later observer sees the same outcome. A Future dropped unobserved never runs its body. Put
side effects that must happen at call time in a synchronous wrapper around the decorated
function.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import threading
import warnings
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from monarch._src.mesh.context import context
from monarch._src.runtime.future import (
    GET_IN_LOOP_WARNING,
    Future,
    blocking_warned_here,
    check_timeout,
    loop_running_here,
)

__all__ = ["returns_future"]

T = TypeVar("T")


class _BodyFuture(Future[Any]):
    """A Future whose outcome is a coroutine's, started by its first observer."""

    __slots__ = ("_body", "_result", "_take_lock", "_tasks")

    _body: tuple[Coroutine[Any, Any, Any], contextvars.Context] | None  # until first observed
    _take_lock: threading.Lock
    _tasks: list[asyncio.Task[Any]]  # the body's task once started (asyncio holds it weakly)
    _result: concurrent.futures.Future[Any]  # this future's own: the body's outcome goes here

    @classmethod
    def _of(cls, coro: Coroutine[Any, Any, Any], ctx: contextvars.Context) -> _BodyFuture:
        result: concurrent.futures.Future[Any] = concurrent.futures.Future()
        fut = cls.from_concurrent(result)
        assert isinstance(fut, _BodyFuture)
        fut._result = result
        fut._body = (coro, ctx)
        fut._take_lock = threading.Lock()
        fut._tasks = []
        return fut

    def _take(self) -> tuple[Coroutine[Any, Any, Any], contextvars.Context] | None:
        with self._take_lock:
            body, self._body = self._body, None
        return body

    def _start(self, body: tuple[Coroutine[Any, Any, Any], contextvars.Context],
               loop: asyncio.AbstractEventLoop) -> asyncio.Task[Any]:
        coro, ctx = body
        task = ctx.run(loop.create_task, coro)
        self._tasks.append(task)
        task.add_done_callback(self._publish)
        return task

    def _publish(self, task: asyncio.Task[Any]) -> None:
        if self._result.done():  # a timeout or interrupt already decided the outcome
            return
        if task.cancelled():
            self._result.set_exception(asyncio.CancelledError())
        elif task.exception() is not None:
            self._result.set_exception(task.exception())
        else:
            self._result.set_result(task.result())

    def _fail(self, exc: BaseException) -> None:
        if not self._result.done():
            self._result.set_exception(exc)

    def _drive(self, body: tuple[Coroutine[Any, Any, Any], contextvars.Context],
               timeout: float | None) -> None:
        """Run the body on a fresh loop of this thread until it ends (or times out)."""
        loop = asyncio.new_event_loop()
        try:
            task = self._start(body, loop)
            try:
                done, _ = loop.run_until_complete(asyncio.wait({task}, timeout=timeout))
            except BaseException:
                self._fail(asyncio.CancelledError())
                task.cancel()
                loop.run_until_complete(asyncio.wait({task}))
                raise
            if not done:
                self._fail(TimeoutError(
                    f"returns_future body did not finish within {timeout} seconds"))
                task.cancel()
                loop.run_until_complete(asyncio.wait({task}))
        finally:
            try:
                leftovers = asyncio.all_tasks(loop)
                for t in leftovers:
                    t.cancel()
                if leftovers:
                    loop.run_until_complete(asyncio.wait(leftovers))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()

    def get(self, timeout: float | None = None) -> Any:
        check_timeout(timeout)
        body = self._body
        if body is None:
            return super().get(timeout)
        if blocking_warned_here():
            warnings.warn(GET_IN_LOOP_WARNING, UserWarning, stacklevel=2)
        body = self._take()
        if body is None:  # another observer took it meanwhile
            return Future.get(self, timeout)
        if not loop_running_here():
            self._drive(body, timeout)
        else:
            # A loop runs on this thread: running another here is not allowed, so run the
            # body on a helper thread with a loop of its own and wait for it.
            errors: list[BaseException] = []

            def run() -> None:
                try:
                    self._drive(body, timeout)
                except BaseException as exc:  # noqa: BLE001  # re-raised below
                    errors.append(exc)

            helper = threading.Thread(target=run, name="monarch-returns-future", daemon=True)
            helper.start()
            helper.join()
            if errors:
                raise errors[0]
        return self._outcome()

    def as_asyncio(self) -> asyncio.Future[Any]:
        if self._body is not None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return super().as_asyncio()  # raises the usual "needs a running loop" error
            body = self._take()
            if body is not None:
                self._start(body, loop)
        return super().as_asyncio()

    def __del__(self) -> None:
        body = getattr(self, "_body", None)
        if body is not None:
            body[0].close()  # never observed: none of its code runs

    def __repr__(self) -> str:
        if getattr(self, "_body", None) is not None:
            return "<monarch.actor.Future not started>"
        return super().__repr__()


def returns_future(function: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., Future[T]]:
    """Make an `async def` return a monarch `Future` (see the module docstring)."""
    if not inspect.iscoroutinefunction(function):
        raise TypeError("returns_future requires an async function")

    @functools.wraps(function)
    def wrapped(*args: Any, **kwargs: Any) -> Future[T]:
        coro = function(*args, **kwargs)
        try:
            context()  # the first call of a process starts the client here, not in the body
            ctx = contextvars.copy_context()
        except BaseException:
            coro.close()
            raise
        return _BodyFuture._of(coro, ctx)

    return wrapped
