"""Cancelling calls: `Future.cancel()`, an interrupt while waiting, and what each kind of endpoint
does when its call is cancelled (real procs).

Every long endpoint takes a port and sends on it once it runs, so the tests cancel a call known
to be running (or known to be queued behind one), never after a sleep.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import select
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from monarch.actor import Actor, Channel, Port, check_cancelled, context, endpoint, this_host

pytestmark = pytest.mark.timeout(120)

# The endpoints below run this long unless cancelled: far longer than any test waits.
LONG = 60.0


class Worker(Actor):
    def __init__(self) -> None:
        self.log: list[str] = []

    @endpoint
    def sleep(self, started: Port[str], s: float) -> str:
        started.send("sleep")
        time.sleep(s)
        self.log.append("sleep finished")
        return "slept"

    @endpoint
    def block(self, started: Port[str], s: float) -> str:
        started.send("block")
        select.select([], [], [], s)  # a C call that is not time.sleep
        self.log.append("block finished")
        return "blocked"

    @endpoint
    def spin(self, started: Port[str], s: float) -> int:
        started.send("spin")
        end, n = time.monotonic() + s, 0
        try:
            while time.monotonic() < end:
                n += 1
        finally:
            self.log.append("spin unwound")
        self.log.append("spin finished")
        return n

    @endpoint
    def polite(self, started: Port[str], s: float) -> str:
        started.send("polite")
        end = time.monotonic() + s
        while time.monotonic() < end:
            if context().cancelled:
                self.log.append("saw cancelled")
                check_cancelled()
        return "done"

    @endpoint
    def record(self, what: str) -> None:
        self.log.append(what)

    @endpoint
    def ping(self) -> str:
        return "pong"

    @endpoint
    def history(self) -> list[str]:
        return list(self.log)


class AsyncWorker(Actor):
    def __init__(self) -> None:
        self.log: list[str] = []

    @endpoint
    async def sleep(self, started: Port[str], s: float) -> str:
        started.send("sleep")
        try:
            await asyncio.sleep(s)
        except asyncio.CancelledError:
            self.log.append("cancelled")
            raise
        return "slept"

    @endpoint
    async def ping(self) -> str:
        return "pong"

    @endpoint
    async def history(self) -> list[str]:
        return list(self.log)


class Relay(Actor):
    """Waits, in a sync endpoint, on a call to another mesh."""

    @endpoint
    def relay(self, started: Port[str], target: Any) -> str:
        return target.slice(gpus=context().message_rank["gpus"]).sleep.call_one(
            started, LONG).get()

    @endpoint
    def ping(self) -> str:
        return "pong"


@pytest.fixture(scope="module")
def procs() -> Any:
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    yield procs
    procs.stop().get(timeout=60)


def _start(endpoint: Any, n: int = 2, s: float = LONG) -> Any:
    """Call `endpoint(port, s)` on every rank; return the future once every rank runs it."""
    port, receiver = Channel.open()
    fut = endpoint.call(port, s)
    for _ in range(n):
        receiver.recv().get(timeout=30)
    return fut


def _cancelled_within(fut: Any, mesh: Any, limit: float) -> float:
    """Cancel `fut`; return how long until every actor of `mesh` answers a ping."""
    t0 = time.monotonic()
    assert fut.cancel()
    assert mesh.ping.call().get(timeout=30).values() == ["pong", "pong"]
    took = time.monotonic() - t0
    assert took < limit, took
    return took


def test_cancelled_future_fails_at_once_and_only_once(procs: Any) -> None:
    w = procs.spawn("once", Worker)
    fut = _start(w.polite)
    assert fut.cancel()
    assert fut.cancelled() and fut.done()
    with pytest.raises(concurrent.futures.CancelledError):
        fut.get()
    assert fut.cancel() is False
    assert w.ping.call().get(timeout=30).values() == ["pong", "pong"]
    done = w.ping.call()
    done.get(timeout=30)
    assert done.cancel() is False and not done.cancelled()


def test_cancel_drops_queued_calls_and_the_actor_keeps_serving(procs: Any) -> None:
    w = procs.spawn("queued", Worker)
    running = _start(w.polite)
    queued = w.record.call("queued call ran")
    assert queued.cancel()
    _cancelled_within(running, w, 5.0)
    for log in w.history.call().get(timeout=10).values():
        assert log == ["saw cancelled"]


def test_async_endpoint_gets_cancelled_error_at_its_await(procs: Any) -> None:
    a = procs.spawn("async", AsyncWorker)
    fut = _start(a.sleep)
    _cancelled_within(fut, a, 2.0)
    assert a.history.call().get(timeout=10).values() == [["cancelled"], ["cancelled"]]


def test_sync_endpoint_that_checks_stops_early(procs: Any) -> None:
    w = procs.spawn("polite", Worker)
    fut = _start(w.polite)
    _cancelled_within(fut, w, 2.0)
    assert w.history.call().get(timeout=10).values() == [["saw cancelled"]] * 2


def test_sync_endpoint_in_python_code_is_interrupted(procs: Any) -> None:
    w = procs.spawn("spin", Worker)
    fut = _start(w.spin)
    _cancelled_within(fut, w, 2.0)
    # The exception unwound the endpoint (its `finally` ran) and the rest did not run.
    assert w.history.call().get(timeout=10).values() == [["spin unwound"]] * 2


def test_time_sleep_in_a_sync_endpoint_is_a_cancellation_point(procs: Any) -> None:
    w = procs.spawn("sleeper", Worker)
    fut = _start(w.sleep)
    _cancelled_within(fut, w, 2.0)
    assert w.history.call().get(timeout=10).values() == [[], []]


def test_sync_endpoint_in_a_c_call_is_interrupted_when_it_returns(procs: Any) -> None:
    w = procs.spawn("blocked", Worker)
    fut = _start(w.block, s=1.5)
    assert fut.cancel()
    assert w.ping.call().get(timeout=30).values() == ["pong", "pong"]
    # `select` returned, then the interruption unwound the endpoint before its next line.
    assert w.history.call().get(timeout=10).values() == [[], []]


def test_cancelling_a_sync_endpoint_cancels_the_call_it_waits_for(procs: Any) -> None:
    relays = procs.spawn("relays", Relay)
    sleepers = procs.spawn("sleepers", Worker)
    port, receiver = Channel.open()
    fut = relays.relay.call(port, sleepers)
    for _ in range(2):  # both sleepers run the inner call
        receiver.recv().get(timeout=30)
    t0 = time.monotonic()
    assert fut.cancel()
    assert relays.ping.call().get(timeout=30).values() == ["pong", "pong"]
    assert sleepers.ping.call().get(timeout=30).values() == ["pong", "pong"]
    assert time.monotonic() - t0 < 2.0
    assert sleepers.history.call().get(timeout=10).values() == [[], []]


def test_call_one_and_stream_cancel(procs: Any) -> None:
    w = procs.spawn("one", Worker)
    port, receiver = Channel.open()
    one = w.slice(gpus=1).polite.call_one(port, LONG)
    receiver.recv().get(timeout=30)
    _cancelled_within(one, w, 2.0)
    port, receiver = Channel.open()
    streamed = list(w.polite.stream(port, LONG))
    receiver.recv().get(timeout=30)
    receiver.recv().get(timeout=30)
    assert streamed[0].cancel()
    for fut in streamed:  # the whole stream is cancelled
        with pytest.raises(concurrent.futures.CancelledError):
            fut.get(timeout=10)
    assert w.ping.call().get(timeout=30).values() == ["pong", "pong"]


def test_a_cancelled_awaiting_task_cancels_the_call(procs: Any) -> None:
    a = procs.spawn("awaited", AsyncWorker)

    async def main() -> None:
        port, receiver = Channel.open()
        entered = asyncio.Event()
        task = asyncio.ensure_future(_await(a.sleep.call(port, LONG), entered))
        await entered.wait()  # the task is awaiting the call (a task cancelled before it
        for _ in range(2):    # started never awaited anything, so there is nothing to cancel)
            await receiver.recv()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def _await(fut: Any, entered: asyncio.Event) -> Any:
        entered.set()
        return await fut

    asyncio.run(main())
    assert a.ping.call().get(timeout=30).values() == ["pong", "pong"]
    assert a.history.call().get(timeout=10).values() == [["cancelled"], ["cancelled"]]


_INTERRUPTED = """
import os, signal, sys, threading, time
from monarch.actor import Actor, Channel, endpoint, this_host
sys.path.insert(0, {tests!r})
from integration.test_cancel import Worker

procs = this_host().spawn_procs(per_host={{"gpus": 2}})
w = procs.spawn("w", Worker)
port, receiver = Channel.open()
fut = w.spin.call(port, 60.0)
receiver.recv().get(timeout=30); receiver.recv().get(timeout=30)
threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    fut.get()
except KeyboardInterrupt as e:
    print("interrupted:", type(e).__name__, e, flush=True)
t0 = time.monotonic()
print(w.ping.call().get(timeout=30).values(), time.monotonic() - t0 < 2.0, flush=True)
procs.stop().get(timeout=60)
"""


def test_interrupt_while_waiting_cancels_the_call() -> None:
    # Run as a script in its own process: SIGINT goes to that process's main thread.
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_INTERRUPTED.format(tests=tests))],
        capture_output=True, text=True, timeout=100,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "interrupted: Interrupted cancelled the call to w.spin on 2 ranks", lines
    assert lines[1] == "['pong', 'pong'] True", lines
