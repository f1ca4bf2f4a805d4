"""monarch.experimental.thread_timeout: bounding synchronous code on any thread."""

from __future__ import annotations

import threading

import pytest

from monarch.experimental.thread_timeout import ThreadTimeout, ThreadTimeoutError


def _spin(stop: threading.Event) -> int:
    n = 0
    while not stop.is_set():  # a loop the compiler cannot prove endless
        n += 1
    return n


def test_a_block_past_its_deadline_raises_in_its_thread() -> None:
    outcome: list[str] = []
    never = threading.Event()

    def worker() -> None:
        try:
            with ThreadTimeout(0.2):
                _spin(never)
        except ThreadTimeoutError:
            outcome.append("timed out")

    t = threading.Thread(target=worker)
    t.start()
    t.join(30)
    assert outcome == ["timed out"]


def test_a_block_that_finishes_in_time_is_untouched() -> None:
    with ThreadTimeout(30) as tt:
        value = sum(range(1000))
    assert value == 499500 and isinstance(tt, ThreadTimeout)


def test_catching_the_timeout_inside_still_fails_the_block() -> None:
    never = threading.Event()
    caught_inside = []
    with pytest.raises(ThreadTimeoutError):
        with ThreadTimeout(0.2):
            try:
                _spin(never)
            except ThreadTimeoutError:
                caught_inside.append(True)
    assert caught_inside == [True]


def test_except_exception_does_not_swallow_it() -> None:
    never = threading.Event()
    assert not issubclass(ThreadTimeoutError, Exception)
    with pytest.raises(ThreadTimeoutError):
        with ThreadTimeout(0.2):
            try:
                _spin(never)
            except Exception:  # noqa: BLE001 - the point of the test
                pytest.fail("ThreadTimeoutError was caught as an Exception")


def test_bad_seconds_single_use_and_nesting_are_refused() -> None:
    for bad in (0, -1, -0.5):
        with pytest.raises(ValueError, match=f"seconds must be positive, got {bad!r}"):
            ThreadTimeout(bad)
    tt = ThreadTimeout(30)
    with tt:
        pass
    with pytest.raises(RuntimeError, match="single-use"):
        with tt:
            pass
    with pytest.raises(RuntimeError, match="cannot be nested"):
        with ThreadTimeout(30):
            with ThreadTimeout(30):
                pass
    with ThreadTimeout(30):  # the failed nesting left this thread usable
        pass
