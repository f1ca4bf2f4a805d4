"""`Completion`, the light `concurrent.futures.Future` behind every reply port."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import threading
from typing import Any

import pytest

from monarch._src.runtime.completion import Completion

pytestmark = pytest.mark.timeout(30)


def test_result_and_exception() -> None:
    done = Completion()
    assert not done.done() and not done.cancelled() and not done.running()
    done.set_result(5)
    assert done.done() and done.result() == 5 and done.exception() is None
    failed = Completion()
    failed.set_exception(ValueError("no"))
    assert isinstance(failed.exception(), ValueError)
    with pytest.raises(ValueError, match="no"):
        failed.result()


def test_completing_twice_is_refused() -> None:
    done = Completion()
    done.set_result(1)
    with pytest.raises(concurrent.futures.InvalidStateError):
        done.set_result(2)
    with pytest.raises(concurrent.futures.InvalidStateError):
        done.set_exception(ValueError())
    assert done.result() == 1


def test_timeout_then_result() -> None:
    pending = Completion()
    with pytest.raises(TimeoutError):
        pending.result(timeout=0.01)
    with pytest.raises(TimeoutError):
        pending.exception(timeout=0)
    pending.set_result("late")  # a waiter that gave up does not stop completion
    assert pending.result(timeout=0) == "late"


def test_cancel() -> None:
    pending = Completion()
    seen: list[Any] = []
    pending.add_done_callback(seen.append)
    assert pending.cancel() and pending.cancel()  # again: still cancelled
    assert pending.cancelled() and pending.done() and seen == [pending]
    with pytest.raises(concurrent.futures.CancelledError):
        pending.result()
    with pytest.raises(concurrent.futures.InvalidStateError):
        pending.set_result(1)
    done = Completion()
    done.set_result(1)
    assert not done.cancel() and not done.cancelled()
    running = Completion()
    assert running.set_running_or_notify_cancel() and running.running()
    assert not running.cancel()
    cancelled = Completion()
    cancelled.cancel()
    assert not cancelled.set_running_or_notify_cancel() and cancelled.cancelled()


def test_blocked_threads_are_woken() -> None:
    pending = Completion()
    results: list[Any] = []
    started = threading.Barrier(5)

    def wait() -> None:
        started.wait()
        results.append(pending.result(timeout=10))

    threads = [threading.Thread(target=wait) for _ in range(4)]
    for t in threads:
        t.start()
    started.wait()
    pending.set_result("go")
    for t in threads:
        t.join(10)
    assert results == ["go"] * 4


def test_callbacks_run_once_in_order_and_after_done_at_once() -> None:
    pending = Completion()
    order: list[str] = []
    pending.add_done_callback(lambda f: order.append("a"))
    pending.add_done_callback(lambda f: 1 / 0)  # logged, does not stop the others
    pending.add_done_callback(lambda f: order.append("b"))
    pending.set_result(None)
    pending.add_done_callback(lambda f: order.append("c"))
    assert order == ["a", "b", "c"]


def test_asyncio_bridge() -> None:
    async def main() -> Any:
        pending = Completion()
        loop = asyncio.get_running_loop()
        loop.call_soon(lambda: threading.Thread(target=pending.set_result, args=(7,)).start())
        return await asyncio.wrap_future(pending)

    assert asyncio.run(main()) == 7


def test_cancelling_the_asyncio_side_cancels_it() -> None:
    pending = Completion()

    async def main() -> None:
        task = asyncio.ensure_future(asyncio.wrap_future(pending))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert pending.cancelled()


def test_wait_helpers_are_refused_clearly() -> None:
    with pytest.raises(TypeError, match="concurrent.futures.wait"):
        concurrent.futures.wait([Completion()], timeout=0)


def test_one_tracked_object_each() -> None:
    """What the class is for: a pending completion is one object for the collector."""
    gc.collect()
    before = len(gc.get_objects())
    kept = [Completion() for _ in range(1000)]
    assert len(gc.get_objects()) - before < 1100
    del kept


def test_outcome_of_each_end() -> None:
    done = Completion()
    done.set_result(3)
    assert done.outcome() == (None, 3)
    failed = Completion()
    err = KeyError("k")
    failed.set_exception(err)
    assert failed.outcome() == (err, None)
    cancelled = Completion()
    assert cancelled.cancel()
    assert cancelled.outcome() is None


def test_outcome_waits_until_done() -> None:
    c = Completion()
    seen: list[Any] = []
    reader = threading.Thread(target=lambda: seen.append(c.outcome()))
    reader.start()
    c.set_result("late")
    reader.join(5.0)
    assert seen == [(None, "late")]
