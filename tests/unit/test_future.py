"""Unit tests for `Future`: blocking reads, caching, lazy decoding and the asyncio bridges.

Futures are built on a bare `concurrent.futures.Future` through `Future.from_concurrent`, the way
the runtime builds them, and completed by the test itself (from another thread where a reader must
be blocked first). Nothing here starts a runtime.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from monarch._src.runtime.future import Future

# Seconds any wait in these tests may take before the test fails instead of hanging.
WAIT = 5.0


def _pending(
    decode: Callable[[Any], Any] | None = None,
) -> tuple[Future[Any], concurrent.futures.Future[Any]]:
    cf: concurrent.futures.Future[Any] = concurrent.futures.Future()
    return Future.from_concurrent(cf, decode), cf


class _CountingDecode:
    """A decode function that records how often, and on which threads, it ran."""

    def __init__(self, result: Callable[[Any], Any] = lambda raw: ("decoded", raw)) -> None:
        self.calls = 0
        self._result = result
        self._lock = threading.Lock()

    def __call__(self, raw: Any) -> Any:
        with self._lock:
            self.calls += 1
        return self._result(raw)


# ---- construction ------------------------------------------------------------------------------


def test_future_direct_construction_raises_type_error() -> None:
    with pytest.raises(TypeError, match="cannot be constructed directly"):
        Future()


def test_future_direct_construction_with_arguments_raises_type_error() -> None:
    cf: concurrent.futures.Future[int] = concurrent.futures.Future()
    with pytest.raises(TypeError, match="returned by Monarch operations"):
        Future(cf)


# ---- get / result / exception -------------------------------------------------------------------


def test_future_get_done_value_returns_it() -> None:
    fut = Future.from_value(42)
    assert fut.done()
    assert fut.get() == 42
    assert fut.result() == 42
    assert fut.exception() is None


def test_future_get_failed_raises_the_exception() -> None:
    err = KeyError("boom")
    fut = Future.from_exception(err)
    with pytest.raises(KeyError) as info:
        fut.get()
    assert info.value is err
    with pytest.raises(KeyError):
        fut.result()


def test_future_exception_failed_returns_it_without_raising() -> None:
    err = ValueError("bad")
    fut = Future.from_exception(err)
    assert fut.exception() is err
    assert fut.exception(timeout=0) is err


def test_future_get_repeated_failure_reraises_same_object() -> None:
    fut = Future.from_exception(RuntimeError("once"))
    seen = []
    for _ in range(3):
        with pytest.raises(RuntimeError) as info:
            fut.get()
        seen.append(info.value)
    assert seen[0] is seen[1] is seen[2]
    assert fut.exception() is seen[0]


def test_future_get_repeated_value_returns_same_object() -> None:
    value = {"a": [1, 2]}
    fut = Future.from_value(value)
    assert fut.get() is value
    assert fut.get() is value


def test_future_get_timeout_on_pending_raises_timeout_error_without_consuming() -> None:
    fut, cf = _pending()
    with pytest.raises(TimeoutError) as info:
        fut.get(timeout=0)
    assert str(info.value) == ""  # torchmonarch's TimeoutError carries no message
    with pytest.raises(TimeoutError):
        fut.get(timeout=0.001)
    assert not fut.done()
    cf.set_result("late")
    assert fut.get(timeout=0) == "late"
    assert fut.get() == "late"


def test_future_exception_timeout_on_pending_returns_timeout_error() -> None:
    # As on torchmonarch: exception() returns whatever get() would raise, a timeout included.
    fut, cf = _pending()
    assert isinstance(fut.exception(timeout=0), TimeoutError)
    assert not fut.done()
    cf.set_exception(OSError("later"))
    assert isinstance(fut.exception(timeout=0), OSError)


def test_future_exception_remote_timeout_error_returns_it() -> None:
    # A TimeoutError that *is* the outcome must be returned, not mistaken for a local timeout.
    err = TimeoutError("the remote side timed out")
    fut = Future.from_exception(err)
    assert fut.exception(timeout=0) is err


def test_future_get_blocked_thread_completed_later_returns_value() -> None:
    fut, cf = _pending()
    out: list[Any] = []
    reader = threading.Thread(target=lambda: out.append(fut.get(timeout=WAIT)))
    reader.start()
    cf.set_result(7)
    reader.join(WAIT)
    assert out == [7]


@pytest.mark.parametrize("timeout", [-1, -0.5, float("nan"), float("inf"), float("-inf")])
def test_future_get_invalid_timeout_raises_value_error(timeout: Any) -> None:
    decode = _CountingDecode()
    fut = Future.from_concurrent(Future.from_value(1)._cf, decode)
    with pytest.raises(
        ValueError, match=r"^invalid timeout .*: expected a non-negative, finite number of seconds$"
    ):
        fut.get(timeout)
    with pytest.raises(ValueError, match="invalid timeout"):
        fut.result(timeout)
    # Rejected before any work: nothing was decoded.
    assert decode.calls == 0


def test_future_get_non_number_timeout_raises_type_error() -> None:
    fut = Future.from_concurrent(Future.from_value(1)._cf, _CountingDecode())
    with pytest.raises(TypeError, match="must be real number, not str"):
        fut.get("x")  # type: ignore[arg-type]


def test_future_get_timeout_too_large_for_a_float_is_refused_as_before() -> None:
    # An int timeout takes the checks' shortcut only in a float's range.
    fut = Future.from_value(1)
    with pytest.raises(OverflowError):
        fut.get(10**400)
    assert fut.get(10**6) == 1 and fut.get(2.5) == 1


def test_future_get_bool_timeout_counts_as_seconds() -> None:
    assert Future.from_value(5).get(True) == 5  # bool is an int, as on torchmonarch


@pytest.mark.parametrize(
    ("timeout", "reason"),
    [(-1, "invalid timeout -1: cannot convert float seconds to Duration: value is negative"),
     (float("nan"), "invalid timeout NaN: cannot convert float seconds to Duration: value is "
                    "either too big or NaN")],
)
def test_future_get_invalid_timeout_after_observed_raises_duration_error(
    timeout: float, reason: str
) -> None:
    # Once read with a timeout (torchmonarch's handle path), a bad timeout is worded as the
    # conversion to a duration, and the value is still there afterwards.
    fut = Future.from_value(1)
    assert fut.get(timeout=5) == 1
    with pytest.raises(ValueError) as info:
        fut.get(timeout)
    assert str(info.value) == reason
    assert fut.get() == 1


def test_future_get_bad_timeout_after_plain_get_returns_cached_value() -> None:
    # A plain get() that finished caches the outcome; later reads do not look at the timeout.
    fut = Future.from_value(1)
    assert fut.get() == 1
    assert fut.get(-1) == 1


@pytest.mark.parametrize("timeout", [-1, float("nan")])
def test_future_exception_invalid_timeout_returns_value_error(timeout: Any) -> None:
    decode = _CountingDecode()
    fut = Future.from_concurrent(Future.from_value(1)._cf, decode)
    err = fut.exception(timeout)
    assert isinstance(err, ValueError) and "invalid timeout" in str(err)
    assert decode.calls == 0


def test_future_get_invalid_timeout_on_pending_raises_value_error_without_waiting() -> None:
    fut, _ = _pending()
    with pytest.raises(ValueError):
        fut.get(-1)
    assert not fut.done()


def test_future_get_zero_timeout_on_done_returns_value() -> None:
    assert Future.from_value("ok").get(timeout=0) == "ok"
    assert Future.from_value("ok").get(timeout=3) == "ok"


# ---- decoding ------------------------------------------------------------------------------------


def test_future_decode_applied_once_across_reads() -> None:
    decode = _CountingDecode()
    fut, cf = _pending(decode)
    cf.set_result("raw")
    first = fut.get()
    assert first == ("decoded", "raw")
    assert fut.get() is first
    assert fut.result() is first
    assert fut.exception() is None
    assert decode.calls == 1


def test_future_decode_not_run_before_first_read() -> None:
    decode = _CountingDecode()
    fut, cf = _pending(decode)
    cf.set_result("raw")
    assert fut.done()
    assert decode.calls == 0
    fut.get()
    assert decode.calls == 1


def test_future_decode_concurrent_getters_decode_once() -> None:
    entered = threading.Event()
    release = threading.Event()

    def slow(raw: Any) -> Any:
        # Hold the first decoder inside decode so the other readers pile up behind it.
        entered.set()
        assert release.wait(WAIT)
        return ["decoded", raw]

    decode = _CountingDecode(slow)
    fut, cf = _pending(decode)
    results: list[Any] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def reader() -> None:
        start.wait(WAIT)
        value = fut.get(timeout=WAIT)
        with lock:
            results.append(value)

    threads = [threading.Thread(target=reader) for _ in range(8)]
    for t in threads:
        t.start()
    cf.set_result("raw")
    assert entered.wait(WAIT)
    release.set()
    for t in threads:
        t.join(WAIT)
    assert decode.calls == 1
    assert len(results) == 8
    assert all(r is results[0] for r in results)


def test_future_decode_failure_is_cached_outcome() -> None:
    decode = _CountingDecode(lambda raw: (_ for _ in ()).throw(ValueError(f"cannot decode {raw}")))
    fut, cf = _pending(decode)
    cf.set_result("raw")
    with pytest.raises(ValueError, match="cannot decode raw") as first:
        fut.get()
    with pytest.raises(ValueError) as second:
        fut.get()
    assert first.value is second.value
    assert fut.exception() is first.value
    assert decode.calls == 1


def test_future_map_error_applied_once_to_exception() -> None:
    mapped: list[BaseException] = []

    def map_error(exc: BaseException) -> BaseException:
        mapped.append(exc)
        return RuntimeError(f"mapped: {exc}")

    cf: concurrent.futures.Future[Any] = concurrent.futures.Future()
    fut: Future[Any] = Future.from_concurrent(cf, map_error=map_error)
    original = OSError("raw")
    cf.set_exception(original)
    with pytest.raises(RuntimeError, match="mapped: raw") as first:
        fut.get()
    assert fut.exception() is first.value
    assert mapped == [original]


def test_future_map_error_not_applied_to_value() -> None:
    cf: concurrent.futures.Future[Any] = concurrent.futures.Future()
    fut: Future[Any] = Future.from_concurrent(cf, map_error=lambda exc: RuntimeError("never"))
    cf.set_result(5)
    assert fut.get() == 5
    assert fut.exception() is None


def test_future_decode_not_applied_to_exception() -> None:
    decode = _CountingDecode()
    fut, cf = _pending(decode)
    cf.set_exception(LookupError("x"))
    assert isinstance(fut.exception(), LookupError)
    assert decode.calls == 0


class _FailsWhenExceptionLooks(concurrent.futures.Future):  # type: ignore[type-arg]
    """Fault double: pending until `Future.exception` itself checks `done()`, then failed.

    This is the moment just after `get()` timed out, when the runtime completes the future.
    """

    def __init__(self, exc: BaseException) -> None:
        super().__init__()
        self._exc = exc

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if timeout is not None and not super().done():
            self.set_exception(self._exc)  # completes as the wait gives up
            raise TimeoutError()
        return super().exception(timeout)


def test_future_exception_completes_at_timeout_returns_the_exception() -> None:
    err = OSError("failed right at the deadline")
    fut = Future.from_concurrent(_FailsWhenExceptionLooks(err))
    assert fut.exception(timeout=0) is err


# ---- get() inside a running loop -----------------------------------------------------------------


class _SignalOnRecord(logging.Handler):
    """Sets `event` when a record matching `text` is logged: the reader is about to block."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.WARNING)
        self.text = text
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


@pytest.fixture
def about_to_block() -> Iterator[_SignalOnRecord]:
    handler = _SignalOnRecord("called from within an active event loop")
    log = logging.getLogger("monarch._src.runtime.future")
    log.addHandler(handler)
    try:
        yield handler
    finally:
        log.removeHandler(handler)


async def test_future_get_in_running_loop_pending_warns_and_returns(
    about_to_block: _SignalOnRecord,
) -> None:
    fut, cf = _pending()

    def complete() -> None:
        # Complete only once get() has warned, i.e. while the loop thread is blocked in it.
        if about_to_block.event.wait(WAIT):
            cf.set_result("value")

    completer = threading.Thread(target=complete)
    completer.start()
    try:
        # A read with a timeout is torchmonarch's handle path, and worded as such.
        with pytest.warns(
            UserWarning, match="Blocking get\\(\\) was called from a running asyncio event loop"
        ):
            value = fut.get(timeout=WAIT)
    finally:
        completer.join(WAIT)
    assert value == "value"


async def test_future_get_in_running_loop_pending_logs_warning(
    about_to_block: _SignalOnRecord, caplog: pytest.LogCaptureFixture
) -> None:
    fut, cf = _pending()
    completer = threading.Thread(
        target=lambda: about_to_block.event.wait(WAIT) and cf.set_result(1)
    )
    completer.start()
    try:
        with caplog.at_level(logging.WARNING, logger="monarch._src.runtime.future"):
            with pytest.warns(UserWarning):
                assert fut.get(timeout=WAIT) == 1
    finally:
        completer.join(WAIT)
    assert any("active event loop" in r.getMessage() for r in caplog.records)


async def test_future_get_in_running_loop_first_read_warns_once() -> None:
    # Whether the first get() warns must not depend on timing, so a finished future warns too;
    # once a plain get() read the outcome, later reads return it without warning (torchmonarch).
    fut = Future.from_value(3)
    with pytest.warns(UserWarning, match="Future.get\\(\\) was called from within an active "
                      "event loop") as record:
        assert fut.get() == 3
        assert fut.result(timeout=1) == 3
    assert len(record) == 1


async def test_future_get_in_running_loop_after_await_warns_blocking_get() -> None:
    fut = Future.from_value(3)
    assert await fut == 3
    with pytest.warns(UserWarning, match="Blocking get\\(\\) was called") as record:
        assert fut.get() == 3
    assert len(record) == 1


async def test_future_get_on_other_thread_while_loop_runs_does_not_warn() -> None:
    fut, cf = _pending()
    cf.set_result("v")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert await asyncio.to_thread(fut.get) == "v"
        assert await asyncio.to_thread(fut.exception) is None
    assert record == []


def test_future_get_outside_loop_does_not_warn() -> None:
    fut, cf = _pending()
    cf.set_result(1)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert fut.get() == 1
        assert fut.get(timeout=0) == 1
    assert record == []


# ---- await ---------------------------------------------------------------------------------------


async def test_future_await_twice_returns_same_value() -> None:
    fut, cf = _pending()
    asyncio.get_running_loop().call_soon(cf.set_result, ["v"])
    first = await fut
    second = await fut
    assert first == ["v"]
    assert second is first
    assert await asyncio.to_thread(fut.get) is first  # get() from a thread without a loop


async def test_future_await_done_value_returns_it() -> None:
    assert await Future.from_value(5) == 5


async def test_future_await_failed_raises_same_exception_each_time() -> None:
    fut, cf = _pending()
    err = ArithmeticError("x")
    threading.Thread(target=cf.set_exception, args=(err,)).start()
    with pytest.raises(ArithmeticError) as first:
        await fut
    with pytest.raises(ArithmeticError) as second:
        await fut
    assert first.value is err
    assert second.value is err


async def test_future_await_completed_from_other_thread_returns_value() -> None:
    decode = _CountingDecode()
    fut, cf = _pending(decode)
    threading.Thread(target=cf.set_result, args=("raw",)).start()
    assert await asyncio.wait_for(fut, WAIT) == ("decoded", "raw")
    assert decode.calls == 1


def test_future_await_outside_loop_raises_value_error() -> None:
    fut = Future.from_value(1)

    async def reader() -> Any:
        return await fut

    coro = reader()
    with pytest.raises(ValueError, match="__await__ with no active event loop"):
        coro.send(None)
    # Not consumed.
    assert fut.get() == 1


def test_future_dunder_await_outside_loop_raises_value_error() -> None:
    fut, _ = _pending()
    gen = fut.__await__()
    with pytest.raises(ValueError, match="__await__ with no active event loop"):
        next(gen)


# ---- as_asyncio ----------------------------------------------------------------------------------


def test_future_as_asyncio_outside_loop_raises_runtime_error_without_consuming() -> None:
    fut, cf = _pending()
    with pytest.raises(RuntimeError, match="running asyncio event loop"):
        fut.as_asyncio()
    cf.set_result("still here")
    with pytest.raises(RuntimeError):
        fut.as_asyncio()
    assert fut.get() == "still here"


async def test_future_as_asyncio_each_call_returns_fresh_future() -> None:
    fut, cf = _pending()
    a = fut.as_asyncio()
    b = fut.as_asyncio()
    assert a is not b
    assert isinstance(a, asyncio.Future)
    assert a.get_loop() is asyncio.get_running_loop()
    threading.Thread(target=cf.set_result, args=(9,)).start()
    assert await asyncio.wait_for(a, WAIT) == 9
    assert await asyncio.wait_for(b, WAIT) == 9
    c = fut.as_asyncio()
    assert c is not a
    assert c.done()
    assert c.result() == 9


async def test_future_as_asyncio_failed_sets_exception() -> None:
    err = IndexError("gone")
    afut = Future.from_exception(err).as_asyncio()
    with pytest.raises(IndexError) as info:
        await afut
    assert info.value is err


async def test_future_as_asyncio_cancelled_waiter_does_not_break_future() -> None:
    fut, cf = _pending()
    afut = fut.as_asyncio()
    afut.cancel()
    cf.set_result("ok")
    assert await fut == "ok"
    assert afut.cancelled()


def test_future_as_asyncio_two_loops_in_two_threads_both_resolve() -> None:
    decode = _CountingDecode()
    fut, cf = _pending(decode)
    ready = [threading.Event(), threading.Event()]
    results: dict[int, Any] = {}
    loops: dict[int, asyncio.AbstractEventLoop] = {}

    def run(i: int) -> None:
        async def wait() -> Any:
            loops[i] = asyncio.get_running_loop()
            afut = fut.as_asyncio()
            ready[i].set()
            first = await asyncio.wait_for(afut, WAIT)
            second = await fut
            return first, second

        results[i] = asyncio.run(wait())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    assert all(e.wait(WAIT) for e in ready)
    cf.set_result("raw")
    for t in threads:
        t.join(WAIT)
    assert loops[0] is not loops[1]
    assert results[0] == (("decoded", "raw"), ("decoded", "raw"))
    assert results[1] == results[0]
    assert decode.calls == 1


# ---- misc ----------------------------------------------------------------------------------------


def test_future_add_done_callback_gets_the_future() -> None:
    fut, cf = _pending()
    seen: list[Any] = []
    fut.add_done_callback(lambda f: seen.append(f.get()))
    assert seen == []
    cf.set_result("x")
    assert seen == ["x"]


def test_future_repr_is_torchmonarchs() -> None:
    fut, _ = _pending()
    assert repr(fut) == f"<monarch._src.actor.future.Future object at {id(fut):#x}>"


# ---- map, wait, outcome --------------------------------------------------------------------------


def test_future_map_applies_fn_to_decoded_value() -> None:
    fut, cf = _pending(lambda raw: raw * 2)
    mapped = fut.map(lambda v: v + 1)
    assert not mapped.done()
    cf.set_result(20)
    assert mapped.done()
    assert mapped.get(timeout=WAIT) == 41
    assert fut.get(timeout=WAIT) == 40


def test_future_map_decodes_source_once() -> None:
    decode = _CountingDecode(lambda raw: raw)
    fut, cf = _pending(decode)
    first, second = fut.map(str), fut.map(lambda v: v * 3)
    cf.set_result(7)
    assert (first.get(), second.get(), fut.get()) == ("7", 21, 7)
    assert decode.calls == 1


def test_future_map_passes_the_same_error_through() -> None:
    err = KeyError("missing")
    calls: list[Any] = []
    mapped = Future.from_exception(err).map(calls.append)
    assert mapped.exception() is err
    assert calls == []


def test_future_map_passes_the_mapped_error_through() -> None:
    cf: concurrent.futures.Future[Any] = concurrent.futures.Future()
    fut: Future[Any] = Future.from_concurrent(cf, map_error=lambda exc: RuntimeError(str(exc)))
    mapped = fut.map(lambda v: v)
    cf.set_exception(ValueError("raw"))
    seen = mapped.exception()
    assert isinstance(seen, RuntimeError) and seen is fut.exception()


def test_future_map_fn_error_is_the_outcome() -> None:
    def boom(_: Any) -> Any:
        raise ValueError("in fn")

    mapped = Future.from_value(1).map(boom)
    with pytest.raises(ValueError, match="in fn"):
        mapped.get()
    with pytest.raises(ValueError, match="in fn"):  # cached, fn ran once
        mapped.get()


def test_future_wait_returns_when_done_without_raising() -> None:
    fut, cf = _pending()
    threading.Timer(0.01, cf.set_exception, (KeyError("later"),)).start()
    assert fut.wait(WAIT) is None
    assert fut.done()
    assert isinstance(fut.exception(), KeyError)


def test_future_wait_times_out_without_consuming() -> None:
    fut, cf = _pending()
    with pytest.raises(TimeoutError):
        fut.wait(0)
    cf.set_result("raw")
    fut.wait(0)
    assert fut.get() == "raw"


def test_future_wait_rejects_bad_timeouts() -> None:
    fut, _ = _pending()
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="invalid timeout"):
            fut.wait(bad)


async def test_future_wait_in_loop_warns_unless_quiet() -> None:
    fut = Future.from_value(1)
    with pytest.warns(UserWarning, match="within an active event loop"):
        fut.wait()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fut.wait(quiet=True)


async def test_future_outcome_reads_done_future_without_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Future.from_value("v").outcome() == "v"
        err = KeyError("k")
        with pytest.raises(KeyError):
            Future.from_exception(err).outcome()


def test_future_outcome_of_pending_future_raises() -> None:
    fut, _ = _pending()
    with pytest.raises(RuntimeError, match="before the future was done"):
        fut.outcome()


def test_future_reader_interrupted_while_settling_leaves_it_to_the_next() -> None:
    """An interrupt that escapes the reader working out the outcome leaves nothing half-set:
    the next reader works it out (and no lock is left claimed)."""
    calls: list[int] = []

    def map_error(exc: BaseException) -> BaseException:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return RuntimeError(f"mapped {exc}")

    cf: concurrent.futures.Future[Any] = concurrent.futures.Future()
    fut: Future[Any] = Future.from_concurrent(cf, map_error=map_error)
    cf.set_exception(ValueError("boom"))
    with pytest.raises(KeyboardInterrupt):
        fut.get()
    with pytest.raises(RuntimeError, match="mapped boom"):
        fut.get()
    assert len(calls) == 2
    assert fut._lock is None
