"""The interruption rule and the delivery of an interruption to a thread (no process).

A thread here plays an actor's thread: it runs a function through `call_hiding_loop`, as an
actor runs a sync endpoint, and `interrupt_thread` is called on it from the test's thread.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from monarch._src.mesh import interruption
from monarch._src.mesh.cancellation import Delivery, interrupt_thread
from monarch._src.mesh.interruption import call_hiding_loop, in_user_code, is_user_code

pytestmark = pytest.mark.timeout(30)


def test_is_user_code_counts_only_the_users_code() -> None:
    assert is_user_code(test_is_user_code_counts_only_the_users_code.__code__)
    assert not is_user_code(threading.Thread.join.__code__)  # the standard library
    assert not is_user_code(yaml.dump.__code__)  # an installed library (site-packages)
    assert not is_user_code(call_hiding_loop.__code__)  # monarch

    def runner() -> None:
        pass

    runner.__code__ = runner.__code__.replace(co_filename=interruption.__file__)
    assert not is_user_code(runner.__code__)
    assert is_user_code(interruption.interruptible(runner).__code__)


class _Endpoint:
    """Runs `body(ready)` in a thread as an actor runs a sync endpoint; records its outcome."""

    def __init__(self, body: Callable[[threading.Event], Any]) -> None:
        self.ready = threading.Event()
        self.outcome: str | None = None
        self.thread = threading.Thread(target=self._run, args=(body,), daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self, body: Callable[[threading.Event], Any]) -> None:
        loop = asyncio.new_event_loop()
        try:
            self.outcome = f"returned {call_hiding_loop(loop, body, self.ready)}"
        except BaseException as exc:
            self.outcome = f"raised {type(exc).__name__}"
        finally:
            loop.close()

    @property
    def ident(self) -> int:
        ident = self.thread.ident
        assert ident is not None
        return ident


def test_interrupt_thread_delivers_in_the_users_loop() -> None:
    def spin(ready: threading.Event) -> None:
        ready.set()
        while True:
            pass

    ep = _Endpoint(spin)
    outcome = Delivery.NOT_NOW
    while outcome is Delivery.NOT_NOW:  # the spin may be caught in Event.set's code first
        outcome = interrupt_thread(ep.ident)
    assert outcome is Delivery.DELIVERED
    ep.thread.join(10)
    assert ep.outcome == "raised CancelledError"


def test_interrupt_thread_waits_while_the_thread_is_in_the_standard_library() -> None:
    q: queue.Queue[str] = queue.Queue()

    def wait(ready: threading.Event) -> str:
        ready.set()
        return q.get(timeout=10)  # threading's Condition.wait, inside queue's code

    ep = _Endpoint(wait)
    for _ in range(20):  # whenever it is looked at, it is in queue/threading code
        assert interrupt_thread(ep.ident) is Delivery.NOT_NOW
    q.put("item")
    ep.thread.join(10)
    assert ep.outcome == "returned item"


def test_interrupt_thread_of_an_ended_thread_is_gone() -> None:
    ep = _Endpoint(lambda ready: ready.set())
    ep.thread.join(10)
    assert interrupt_thread(ep.ident) is Delivery.GONE
    assert ep.outcome == "returned None"


def test_in_user_code_refuses_the_endpoint_runner_itself() -> None:
    # The innermost frame being call_hiding_loop's (before or after the endpoint) is monarch's:
    # an exception there could skip giving the loop back.
    seen: list[bool] = []

    def body() -> None:
        import sys

        seen.append(in_user_code(sys._getframe()))
        seen.append(in_user_code(sys._getframe().f_back))

    call_hiding_loop(None, body)  # type: ignore[arg-type]
    assert seen == [True, False]


def test_an_interruption_notes_its_arrival_and_is_never_delivered_twice() -> None:
    from monarch._src.mesh import cancellation

    stop, got = threading.Event(), threading.Event()

    def spin_until_told(ready: threading.Event) -> str:
        ready.set()
        caught = 0
        while not stop.is_set():
            try:
                while not stop.is_set():
                    pass
            except asyncio.CancelledError as exc:  # the user's code handles the cancellation
                caught += 1
                assert type(exc).__name__ == "CancelledError"
                got.set()
        return f"caught {caught}"

    ep = _Endpoint(spin_until_told)
    outcome = Delivery.NOT_NOW
    while outcome is Delivery.NOT_NOW:
        outcome = interrupt_thread(ep.ident)
    assert got.wait(10)
    assert ep.ident in cancellation._arrived  # noted where the user's handler caught it

    # A retry of the same call (as after an attempt that seemed withdrawn) delivers nothing more.
    class _Thread:
        thread = ep.thread

    calls = cancellation.CallCancellation(mailbox=None, thread=_Thread())  # type: ignore[arg-type]
    call = object()
    calls.running, calls.running_sync = call, True  # type: ignore[assignment]
    calls._interrupt_sync(call)  # type: ignore[arg-type]
    assert calls._interrupted is call
    stop.set()
    ep.thread.join(10)
    assert ep.outcome == "returned caught 1"
