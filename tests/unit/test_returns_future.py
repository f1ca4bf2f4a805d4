"""monarch.actor.returns_future: an async def observed as a monarch Future."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from monarch.actor import Future, returns_future

_var: contextvars.ContextVar[str] = contextvars.ContextVar("_var", default="unset")


def test_get_and_await_both_work_and_share_one_run() -> None:
    runs: list[int] = []

    @returns_future
    async def add(x: int) -> int:
        runs.append(x)
        await asyncio.sleep(0)
        return x + 1

    fut = add(1)
    assert isinstance(fut, Future)
    assert runs == []  # nothing runs until observed
    assert fut.get(timeout=30) == 2 and fut.get() == 2
    assert runs == [1]

    async def main() -> tuple[int, int]:
        other = add(10)
        return await other, await other

    assert asyncio.run(main()) == (11, 11)
    assert runs == [1, 10]


def test_exceptions_reach_every_observer() -> None:
    @returns_future
    async def boom() -> None:
        raise ValueError("boom")

    fut = boom()
    with pytest.raises(ValueError, match="boom"):
        fut.get(timeout=30)
    assert isinstance(fut.exception(), ValueError)


def test_timeout_cancels_the_body() -> None:
    cancelled = []

    @returns_future
    async def slow() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    fut = slow()
    with pytest.raises(TimeoutError):
        fut.get(timeout=0.1)
    assert cancelled == [True]
    with pytest.raises(TimeoutError):  # the outcome is final
        fut.get(timeout=30)


def test_body_sees_the_callers_context_variables() -> None:
    @returns_future
    async def read() -> str:
        return _var.get()

    token = _var.set("caller")
    try:
        fut = read()
    finally:
        _var.reset(token)
    assert fut.get(timeout=30) == "caller"


def test_get_inside_a_running_loop_uses_a_helper_thread_and_warns() -> None:
    @returns_future
    async def value() -> int:
        return 7

    async def main() -> int:
        with pytest.warns(UserWarning, match="active event loop"):
            return value().get(timeout=30)

    assert asyncio.run(main()) == 7


def test_only_async_functions_are_accepted() -> None:
    with pytest.raises(TypeError, match="returns_future requires an async function"):
        returns_future(lambda: 1)  # type: ignore[arg-type]


def test_an_unobserved_future_never_runs_its_body() -> None:
    runs: list[bool] = []

    @returns_future
    async def side_effect() -> None:
        runs.append(True)

    fut = side_effect()
    del fut
    import gc

    gc.collect()
    assert runs == []
