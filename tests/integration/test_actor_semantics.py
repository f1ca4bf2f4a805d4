"""What an actor sees and guarantees: its thread and event loop, one message at a time, and
the `@concurrent_endpoint` exception to that rule.

Every test spawns fresh actors on the session's shared proc meshes; no test here stops or
damages a proc.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from typing import Any

import pytest

from monarch.actor import (
    Actor,
    ActorError,
    Channel,
    Port,
    concurrent_endpoint,
    endpoint,
)

# Generous bound on any single remote wait: a bug fails the test instead of hanging it.
TIMEOUT = 30.0
# How long a test waits to see that something has *not* happened yet.
NOT_YET = 0.5

# Per-process gates shared by the actors of one worker process, keyed by a token per test.
_GATES: dict[str, threading.Event] = {}
_GATES_LOCK = threading.Lock()


def _gate(token: str) -> threading.Event:
    with _GATES_LOCK:
        return _GATES.setdefault(token, threading.Event())


class Echo(Actor):
    @endpoint
    def echo(self, value: Any) -> Any:
        return value


class NoLoop(Actor):
    @endpoint
    def probe(self, other: Echo) -> tuple[bool, Any, list[str]]:
        try:
            asyncio.get_running_loop()
            loop_visible = True
        except RuntimeError:
            loop_visible = False
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            echoed = other.echo.call_one("hi").get(timeout=TIMEOUT)
        return loop_visible, echoed, [str(w.message) for w in caught]


class SyncTls(Actor):
    def __init__(self) -> None:
        self.local = threading.local()
        self.local.count = 0
        self.init_thread = threading.get_ident()

    @endpoint
    def bump(self) -> tuple[int, bool]:
        self.local.count += 1
        return self.local.count, threading.get_ident() == self.init_thread


class AsyncTls(Actor):
    def __init__(self) -> None:
        self.local = threading.local()
        self.local.count = 0
        self.init_thread = threading.get_ident()

    @endpoint
    async def bump(self) -> tuple[int, bool]:
        self.local.count += 1
        return self.local.count, threading.get_ident() == self.init_thread


class LoopKeeper(Actor):
    def __init__(self) -> None:
        # Created on first use, on the actor's loop; None until then.
        self._queue: asyncio.Queue[int] | None = None

    def _q(self) -> asyncio.Queue[int]:
        if self._queue is None:
            self._queue = asyncio.Queue()
        return self._queue

    @endpoint
    async def loop_id(self) -> int:
        return id(asyncio.get_running_loop())

    @endpoint
    async def put(self, value: int) -> None:
        self._q().put_nowait(value)

    @endpoint
    async def take(self) -> int:
        return await self._q().get()


class Serial(Actor):
    def __init__(self) -> None:
        self.finished = 0

    @endpoint(explicit_response_port=True)
    async def reply_then_wait(self, port: Port[Port[str]]) -> None:
        gate_port, gate = Channel[str].open()
        port.send(gate_port)
        await gate.recv()
        self.finished += 1

    @endpoint
    async def ping(self) -> int:
        return self.finished


class Parallel(Actor):
    def __init__(self) -> None:
        # Created on first use, on the actor's loop; None until then.
        self._released: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self._released is None:
            self._released = asyncio.Event()
        return self._released

    @concurrent_endpoint
    async def wait_released(self) -> str:
        await self._event().wait()
        return "released"

    @endpoint
    async def release(self) -> None:
        self._event().set()

    @concurrent_endpoint
    async def fail(self) -> None:
        raise ValueError("concurrent boom")

    @endpoint
    async def ok(self) -> str:
        return "ok"


class Blocker(Actor):
    @endpoint
    def wait_gate(self, token: str) -> bool:
        return _gate(token).wait(timeout=TIMEOUT)


class Opener(Actor):
    @endpoint
    def open_gate(self, token: str) -> None:
        _gate(token).set()


# --- loops and threads (§4.8, §4.11, §2.2) ----------------------------------------------------


def test_sync_endpoint_has_no_running_loop_and_get_does_not_warn(procs2: Any) -> None:
    other = procs2.spawn("sem_noloop_echo", Echo)
    # Another sender may race ahead of __init__; the first call from the spawner settles it.
    assert list(other.echo.call("warm").get(timeout=TIMEOUT).values()) == ["warm", "warm"]
    prober = procs2.spawn("sem_noloop", NoLoop)
    replies = list(prober.probe.call(other.slice(gpus=0)).get(timeout=TIMEOUT).values())
    assert replies == [(False, "hi", []), (False, "hi", [])]


@pytest.mark.parametrize("cls", [SyncTls, AsyncTls])
def test_thread_local_set_in_init_persists_across_calls(procs2: Any, cls: type[Actor]) -> None:
    one = procs2.spawn(f"sem_tls_{cls.__name__}", cls).slice(gpus=1)
    replies = [one.bump.call_one().get(timeout=TIMEOUT) for _ in range(4)]
    assert replies == [(1, True), (2, True), (3, True), (4, True)]


def test_async_endpoints_share_one_long_lived_loop(procs2: Any) -> None:
    one = procs2.spawn("sem_loop_keeper", LoopKeeper).slice(gpus=0)
    first = one.loop_id.call_one().get(timeout=TIMEOUT)
    one.put.call_one(1).get(timeout=TIMEOUT)
    one.put.call_one(2).get(timeout=TIMEOUT)
    assert one.take.call_one().get(timeout=TIMEOUT) == 1
    assert one.take.call_one().get(timeout=TIMEOUT) == 2
    assert one.loop_id.call_one().get(timeout=TIMEOUT) == first


def test_actors_in_same_process_run_concurrently(procs2: Any) -> None:
    blocker = procs2.spawn("sem_blocker", Blocker)
    opener = procs2.spawn("sem_opener", Opener)
    waiting = blocker.wait_gate.call("sem_same_proc_gate")
    opener.open_gate.call("sem_same_proc_gate").get(timeout=TIMEOUT)
    assert list(waiting.get(timeout=TIMEOUT).values()) == [True, True]


# --- one message at a time, and concurrent endpoints (§2.2, §4.40) ------------------------------


@pytest.mark.slow
def test_async_endpoint_that_replied_blocks_next_call_until_body_finishes(procs2: Any) -> None:
    one = procs2.spawn("sem_serial", Serial).slice(gpus=0)
    gate_port = one.reply_then_wait.call_one().get(timeout=TIMEOUT)
    ping = one.ping.call_one()
    with pytest.raises(TimeoutError):
        ping.get(timeout=NOT_YET)
    gate_port.send("go")
    assert ping.get(timeout=TIMEOUT) == 1


def test_concurrent_endpoint_released_by_later_message(procs2: Any) -> None:
    one = procs2.spawn("sem_parallel", Parallel).slice(gpus=0)
    waiting = one.wait_released.call_one()
    one.release.call_one().get(timeout=TIMEOUT)
    assert waiting.get(timeout=TIMEOUT) == "released"


def test_concurrent_endpoint_exception_returns_actor_error_and_actor_survives(
    procs2: Any,
) -> None:
    one = procs2.spawn("sem_parallel_fail", Parallel).slice(gpus=0)
    with pytest.raises(ActorError, match=r"Actor call sem_parallel_fail\.fail failed"):
        one.fail.call_one().get(timeout=TIMEOUT)
    assert one.ok.call_one().get(timeout=TIMEOUT) == "ok"
