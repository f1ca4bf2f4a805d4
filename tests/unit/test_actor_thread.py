"""Unit tests for `ActorThread`: one message at a time, in arrival order, until `STOP`.

Every test stops its thread with `STOP` and waits on `stopped`, so no actor thread outlives it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from monarch._src.runtime.actor_thread import STOP, ActorThread

WAIT = 5.0


class _Recorder:
    """A synchronous handler that records messages and signals when it has seen `expect` of them."""

    def __init__(self, expect: int) -> None:
        self.seen: list[Any] = []
        self.threads: set[str] = set()
        self.expect = expect
        self.all_seen = threading.Event()

    def __call__(self, message: Any) -> None:
        self.seen.append(message)
        self.threads.add(threading.current_thread().name)
        if len(self.seen) >= self.expect:
            self.all_seen.set()


@pytest.fixture
def started() -> Iterator[list[ActorThread]]:
    """Threads a test starts; each is stopped (if still running) and joined afterwards."""
    threads: list[ActorThread] = []
    yield threads
    for t in threads:
        if not t.stopped.is_set():
            t.enqueue(STOP)
        assert t.stopped.wait(WAIT)
        t.thread.join(WAIT)


def _start(started: list[ActorThread], name: str, handle: Any, on_exit: Any = None) -> ActorThread:
    t = ActorThread(name, handle, on_exit)
    started.append(t)
    t.start()
    return t


def test_actor_thread_messages_handled_in_fifo_order(started: list[ActorThread]) -> None:
    rec = _Recorder(200)
    t = _start(started, "fifo", rec)
    for i in range(200):
        t.enqueue(i)
    assert rec.all_seen.wait(WAIT)
    assert rec.seen == list(range(200))
    assert rec.threads == {"monarch-actor:fifo"}


def test_actor_thread_enqueued_before_start_handled_in_order(started: list[ActorThread]) -> None:
    rec = _Recorder(3)
    t = ActorThread("early", rec)
    started.append(t)
    for m in ("a", "b", "c"):
        t.enqueue(m)
    t.start()
    assert rec.all_seen.wait(WAIT)
    assert rec.seen == ["a", "b", "c"]


def test_actor_thread_idle_then_enqueue_wakes_handler(started: list[ActorThread]) -> None:
    rec = _Recorder(1)
    t = _start(started, "idle", rec)
    t.enqueue("first")
    assert rec.all_seen.wait(WAIT)
    # The consumer is now idle (or about to be); a later message must wake it.
    rec.all_seen.clear()
    rec.expect = 2
    t.enqueue("second")
    assert rec.all_seen.wait(WAIT)
    assert rec.seen == ["first", "second"]


def test_actor_thread_async_handlers_serialized(started: list[ActorThread]) -> None:
    log: list[str] = []
    first_started = threading.Event()
    done = threading.Event()
    gate: dict[str, asyncio.Future[None]] = {}
    seen_at_release: list[list[str]] = []

    async def handle(message: str) -> None:
        log.append(f"{message}-start")
        if message == "a":
            gate["a"] = asyncio.get_running_loop().create_future()
            first_started.set()
            await gate["a"]
        else:
            # A real suspension point inside the second handler too.
            step = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(step.set_result, None)
            await step
        log.append(f"{message}-end")
        if message == "b":
            done.set()

    t = _start(started, "serial", handle)
    t.enqueue("a")
    t.enqueue("b")
    assert first_started.wait(WAIT)

    def release() -> None:
        # Runs on the actor's loop while "a" is suspended: "b" must not have started.
        seen_at_release.append(list(log))
        gate["a"].set_result(None)

    t.loop.call_soon_threadsafe(release)
    assert done.wait(WAIT)
    assert seen_at_release == [["a-start"]]
    assert log == ["a-start", "a-end", "b-start", "b-end"]


def test_actor_thread_loop_persists_across_messages(started: list[ActorThread]) -> None:
    loops: list[asyncio.AbstractEventLoop] = []
    done = threading.Event()

    async def handle(message: int) -> None:
        loops.append(asyncio.get_running_loop())
        if message == 2:
            done.set()

    t = _start(started, "loop", handle)
    for i in range(3):
        t.enqueue(i)
    assert done.wait(WAIT)
    assert loops[0] is loops[1] is loops[2] is t.loop


def test_actor_thread_stop_ends_after_earlier_messages(started: list[ActorThread]) -> None:
    rec = _Recorder(10**9)
    exited = threading.Event()
    t = _start(started, "stop", rec, on_exit=exited.set)
    for i in range(5):
        t.enqueue(i)
    t.enqueue(STOP)
    t.enqueue("after stop")
    assert t.stopped.wait(WAIT)
    assert exited.wait(WAIT)
    t.thread.join(WAIT)
    assert not t.thread.is_alive()
    assert rec.seen == [0, 1, 2, 3, 4]
    assert t.loop.is_closed()


def test_actor_thread_stop_cancels_leftover_tasks(started: list[ActorThread]) -> None:
    cancelled = threading.Event()
    spawned = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    def handle(message: Any) -> None:
        # Like a concurrent endpoint: start a task and return at once.
        asyncio.get_running_loop().create_task(forever())
        spawned.set()

    t = _start(started, "tasks", handle)
    t.enqueue("spawn")
    assert spawned.wait(WAIT)
    t.enqueue(STOP)
    assert t.stopped.wait(WAIT)
    assert cancelled.is_set()


def test_actor_thread_on_exit_runs_after_stopped_set(started: list[ActorThread]) -> None:
    observed: list[bool] = []
    t = ActorThread("exit", lambda m: None, on_exit=lambda: observed.append(t.stopped.is_set()))
    started.append(t)
    t.start()
    t.enqueue(STOP)
    t.thread.join(WAIT)
    assert observed == [True]


def test_actor_thread_enqueue_after_stop_does_not_raise(started: list[ActorThread]) -> None:
    rec = _Recorder(10**9)
    t = _start(started, "late", rec)
    t.enqueue(STOP)
    assert t.stopped.wait(WAIT)
    t.thread.join(WAIT)
    t.enqueue("too late")  # the loop is closed: the message is dropped, not an error
    assert rec.seen == []


def test_actor_thread_enqueue_from_many_threads_loses_nothing(started: list[ActorThread]) -> None:
    producers, per_producer = 8, 2000
    rec = _Recorder(producers * per_producer)
    t = _start(started, "many", rec)
    go = threading.Barrier(producers)

    def produce(p: int) -> None:
        go.wait(WAIT)
        for i in range(per_producer):
            t.enqueue((p, i))

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(WAIT)
    assert rec.all_seen.wait(WAIT)
    assert len(rec.seen) == producers * per_producer
    for p in range(producers):
        # Each producer's own messages keep their order.
        assert [i for (q, i) in rec.seen if q == p] == list(range(per_producer))


def test_actor_thread_stop_from_other_thread_after_burst_handles_all(
    started: list[ActorThread],
) -> None:
    rec = _Recorder(10**9)
    t = _start(started, "burst", rec)

    def produce() -> None:
        for i in range(1000):
            t.enqueue(i)
        t.enqueue(STOP)

    producer = threading.Thread(target=produce)
    producer.start()
    producer.join(WAIT)
    assert t.stopped.wait(WAIT)
    assert rec.seen == list(range(1000))


def test_actor_thread_queued_is_a_snapshot_in_arrival_order() -> None:
    thread = ActorThread("snapshot", lambda message: None)
    for i in range(3):
        thread.enqueue(i)  # not started: everything stays queued
    snapshot = thread.queued()
    assert snapshot == [0, 1, 2]
    thread.enqueue(3)
    assert snapshot == [0, 1, 2]
    assert thread.queued() == [0, 1, 2, 3]
    thread.loop.close()  # never started: its loop is closed here


# ---- waking the actor's loop (`_IdleSelector`) -------------------------------------------------


def _idle(t: ActorThread) -> None:
    """Wait until `t`'s loop has gone back to waiting: a no-op handled after everything before."""
    flushed = threading.Event()
    t.loop.call_soon_threadsafe(flushed.set)
    assert flushed.wait(WAIT)


def test_actor_thread_idle_loop_is_woken_without_epoll(started: list[ActorThread]) -> None:
    """With no file of its own to watch, the loop sleeps on a lock: messages and
    call_soon_threadsafe wake it without a single epoll wait."""
    rec = _Recorder(1)
    t = _start(started, "lock-wake", rec)
    t.enqueue("first")
    assert rec.all_seen.wait(WAIT)
    polls: list[float | None] = []
    inner = t.loop.idle._inner
    real_select = inner.select

    def counting_select(timeout: float | None = None) -> Any:
        polls.append(timeout)
        return real_select(timeout)

    inner.select = counting_select  # type: ignore[method-assign]
    for i in range(50):
        rec.all_seen.clear()
        rec.expect = i + 2
        t.enqueue(i)
        assert rec.all_seen.wait(WAIT)
        woke = threading.Event()
        t.loop.call_soon_threadsafe(woke.set)
        assert woke.wait(WAIT)
    assert polls == []
    assert rec.seen == ["first", *range(50)]


def test_actor_thread_idle_loop_runs_its_timers(started: list[ActorThread]) -> None:
    """A timer set by a handler fires while the loop sleeps on its lock (the wait is bounded by
    the next timer), and so does a task sleeping on the loop."""
    fired = threading.Event()
    slept = threading.Event()
    tasks: list[asyncio.Task[None]] = []

    async def napper() -> None:
        await asyncio.sleep(0.01)
        slept.set()

    def handle(message: str) -> None:
        loop = asyncio.get_event_loop()
        loop.call_later(0.01, fired.set)
        tasks.append(loop.create_task(napper()))

    t = _start(started, "timers", handle)
    t.enqueue("arm")
    assert fired.wait(WAIT)
    assert slept.wait(WAIT)


def test_actor_thread_loop_with_a_reader_polls_it_and_still_takes_messages(
    started: list[ActorThread],
) -> None:
    """A handler that watches a socket of its own moves the loop to epoll: the socket's data is
    read, messages keep waking it (through the wake-up socket), and once the reader is removed
    the loop goes back to its lock."""
    import socket

    ours, theirs = socket.socketpair()
    got: list[bytes] = []
    data_seen = threading.Event()
    rec = _Recorder(1)

    def on_readable() -> None:
        got.append(ours.recv(100))
        data_seen.set()

    def handle(message: str) -> None:
        loop = asyncio.get_event_loop()
        if message == "watch":
            loop.add_reader(ours.fileno(), on_readable)
        elif message == "unwatch":
            loop.remove_reader(ours.fileno())
        rec(message)

    try:
        t = _start(started, "reader", handle)
        t.enqueue("watch")
        assert rec.all_seen.wait(WAIT)
        _idle(t)
        theirs.send(b"ping")
        assert data_seen.wait(WAIT)
        assert got == [b"ping"]
        for i, message in enumerate(["m1", "m2", "unwatch", "m3"]):
            rec.all_seen.clear()
            rec.expect = i + 2
            t.enqueue(message)
            assert rec.all_seen.wait(WAIT)
        assert len(t.loop.idle.get_map()) == 1  # only the wake-up socket again
        assert rec.seen == ["watch", "m1", "m2", "unwatch", "m3"]
    finally:
        ours.close()
        theirs.close()


def test_idle_selector_never_loses_a_ring() -> None:
    """A sleeper that waits without a timeout is woken by every ring, whichever of the two
    comes first; rings racing each other never raise."""
    from monarch._src.runtime.actor_thread import _IdleSelector

    selector = _IdleSelector()
    pending: list[int] = []
    acked = threading.Event()
    stop = False

    def sleeper() -> None:
        while not stop:
            selector.select(None)
            if pending:
                pending.clear()
                acked.set()

    consumer = threading.Thread(target=sleeper)
    consumer.start()
    try:
        for i in range(300):
            acked.clear()
            pending.append(i)
            if i % 3 == 0:  # some rings race each other
                extra = threading.Thread(target=selector.ring)
                extra.start()
                selector.ring()
                extra.join(WAIT)
            else:
                selector.ring()
            assert acked.wait(WAIT), f"ring {i} was lost"
    finally:
        stop = True
        selector.ring()
        consumer.join(WAIT)
        selector.close()
    assert not consumer.is_alive()


def test_actor_thread_context_set_by_a_handler_is_seen_by_the_coroutine_it_returns(
    started: list[ActorThread],
) -> None:
    """A handler that sets a context variable (the message's rank, as `HostedActor._call`
    does) and returns a coroutine: the coroutine sees that value, whether the handler ran
    while the actor was idle or busy; sync and async messages keep their order."""
    import contextvars

    var: contextvars.ContextVar[int] = contextvars.ContextVar("var", default=-1)
    seen: list[tuple[str, int, int]] = []
    first = threading.Event()
    done = threading.Event()

    def note(kind: str, message: int) -> None:
        seen.append((kind, message, var.get()))
        if message == 0:
            first.set()
        if message == 9:
            done.set()

    async def later(message: int) -> None:
        await asyncio.sleep(0)
        note("async", message)

    def handle(message: int) -> Any:
        var.set(message)
        if message % 3 == 0:
            return later(message)
        note("sync", message)
        return None

    t = _start(started, "context", handle)
    t.enqueue(0)
    assert first.wait(WAIT)
    _idle(t)
    for i in range(1, 10):  # a burst, after the actor went idle
        t.enqueue(i)
    assert done.wait(WAIT)
    assert [m for _, m, _ in seen] == list(range(10))
    assert all(message == value for _, message, value in seen)
    assert [kind for kind, _, _ in seen] == [
        "async" if m % 3 == 0 else "sync" for m in range(10)]
