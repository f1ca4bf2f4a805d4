"""Endpoint exceptions returned through reply ports, and `Future` semantics on real calls.

An exception raised by an endpoint that has a reply port is the caller's problem, not a
failure of the actor: the caller gets an `ActorError`, the actor keeps serving, and the
client's fault hook stays silent. Every test spawns fresh actors on the shared proc meshes.
"""

from __future__ import annotations

import asyncio
import math
import pickle
from typing import Any

import pytest

from monarch.actor import (
    Actor,
    ActorError,
    Channel,
    Future,
    Port,
    current_rank,
    endpoint,
    send,
)

# Generous bound on any single remote wait: a bug fails the test instead of hanging it.
TIMEOUT = 30.0
TRACEBACK_HEADER = "Traceback of where the remote call failed (most recent call last):"
CAUSE_PHRASE = "The above exception was the direct cause of the following exception"
CONTEXT_PHRASE = "During handling of the above exception, another exception occurred"


class DeliberateError(Exception):
    """Raised by endpoints on purpose; a distinct type so tests can see it survive the trip."""


def _explode_on_load() -> None:
    raise ValueError("cannot be unpickled here")


class LoadBomb:
    """Pickles fine; unpickling it raises."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _explode_on_load, ()


class SyncFaulty(Actor):
    @endpoint
    def fail(self, message: str) -> None:
        raise DeliberateError(message)

    @endpoint
    def ok(self) -> str:
        return "ok"


class AsyncFaulty(Actor):
    @endpoint
    async def fail(self, message: str) -> None:
        raise DeliberateError(message)

    @endpoint
    async def fail_on(self, rank: int) -> int:
        if current_rank().rank == rank:
            raise DeliberateError(f"rank {rank} failed")
        return current_rank().rank

    @endpoint
    async def fail_with_cause(self) -> None:
        try:
            raise KeyError("inner cause")
        except KeyError as exc:
            raise DeliberateError("outer with cause") from exc

    @endpoint
    async def fail_with_context(self) -> None:
        try:
            raise KeyError("inner context")
        except KeyError:
            raise DeliberateError("outer with context")  # noqa: B904 - the implicit context is the point

    @endpoint
    async def echo(self, value: Any) -> Any:
        return value

    @endpoint
    async def ok(self) -> str:
        return "ok"


class Deferred(Actor):
    """`later` replies only when a following `answer` message says what to reply."""

    def __init__(self) -> None:
        # Reply ports of `later` calls not answered yet, oldest first.
        self._held: list[Port[Any]] = []

    @endpoint(explicit_response_port=True)
    async def later(self, port: Port[Any]) -> None:
        self._held.append(port)

    @endpoint
    async def answer(self, value: Any) -> None:
        self._held.pop(0).send(value)

    @endpoint
    async def numbers(self) -> list[int]:
        return [1, 2, 3]

    @endpoint
    async def fail(self) -> None:
        raise DeliberateError("deferred failure")


def _check_actor_error(error: BaseException, mesh_name: str, message: str) -> None:
    assert isinstance(error, ActorError)
    assert isinstance(error.exception, DeliberateError)
    assert str(error.exception) == message
    assert error.message == f"Actor call {mesh_name}.fail failed."
    text = str(error)
    assert f"Actor call {mesh_name}.fail failed." in text
    assert TRACEBACK_HEADER in text
    assert message in text


def _fail_futures(mesh: Any, adverb: str, message: str) -> list[Future[Any]]:
    if adverb == "call_one":
        return [mesh.slice(gpus=0).fail.call_one(message)]
    if adverb == "stream":
        return list(mesh.fail.stream(message))
    return [getattr(mesh.fail, adverb)(message)]


# --- ActorError through every adverb with a reply port (§4.27) ----------------------------------


@pytest.mark.parametrize(
    ("cls", "adverb"),
    [
        (SyncFaulty, "call_one"),
        (SyncFaulty, "call"),
        (SyncFaulty, "stream"),
        (AsyncFaulty, "call_one"),
        (AsyncFaulty, "call"),
        (AsyncFaulty, "choose"),
    ],
)
def test_endpoint_exception_with_reply_port_raises_actor_error(
    procs2: Any, cls: type[Actor], adverb: str
) -> None:
    name = f"err_{cls.__name__.lower()}_{adverb}"
    mesh = procs2.spawn(name, cls)
    futures = _fail_futures(mesh, adverb, f"{adverb} went wrong")
    assert len(futures) == (2 if adverb == "stream" else 1)
    for future in futures:
        with pytest.raises(ActorError) as info:
            future.get(timeout=TIMEOUT)
        _check_actor_error(info.value, name, f"{adverb} went wrong")


async def test_endpoint_exception_awaited_raises_actor_error(procs2: Any) -> None:
    mesh = procs2.spawn("err_awaited", AsyncFaulty)
    with pytest.raises(ActorError) as info:
        await mesh.slice(gpus=1).fail.call_one("awaited failure")
    _check_actor_error(info.value, "err_awaited", "awaited failure")


def test_send_with_port_endpoint_exception_reaches_receiver_as_actor_error(procs2: Any) -> None:
    mesh = procs2.spawn("err_send_port", AsyncFaulty)
    port, receiver = Channel.open()
    send(mesh.slice(gpus=0).fail, ("sent failure",), {}, port=port)
    with pytest.raises(ActorError) as info:
        receiver.recv().get(timeout=TIMEOUT)
    _check_actor_error(info.value, "err_send_port", "sent failure")


def test_call_one_rank_raises_whole_call_fails_and_others_unaffected(procs2: Any) -> None:
    mesh = procs2.spawn("err_one_rank", AsyncFaulty)
    with pytest.raises(ActorError) as info:
        mesh.fail_on.call(1).get(timeout=TIMEOUT)
    assert isinstance(info.value.exception, DeliberateError)
    assert str(info.value.exception) == "rank 1 failed"
    assert list(mesh.fail_on.call(-1).get(timeout=TIMEOUT).values()) == [0, 1]


# --- the actor survives; no supervision event (§4.28) -------------------------------------------


@pytest.mark.parametrize("cls", [SyncFaulty, AsyncFaulty])
def test_endpoint_exception_actor_survives_and_fault_hook_not_called(
    procs2: Any, fault_recorder: Any, cls: type[Actor]
) -> None:
    mesh = procs2.spawn(f"err_survives_{cls.__name__.lower()}", cls)
    with pytest.raises(ActorError):
        mesh.fail.call("first failure").get(timeout=TIMEOUT)
    assert list(mesh.ok.call().get(timeout=TIMEOUT).values()) == ["ok", "ok"]
    with pytest.raises(ActorError):
        mesh.slice(gpus=1).fail.call_one("second failure").get(timeout=TIMEOUT)
    assert mesh.slice(gpus=1).ok.call_one().get(timeout=TIMEOUT) == "ok"
    assert fault_recorder.texts == []


# --- what the error carries (§4.31, §2.11) ------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "inner", "outer", "phrase"),
    [
        ("fail_with_cause", "inner cause", "outer with cause", CAUSE_PHRASE),
        ("fail_with_context", "inner context", "outer with context", CONTEXT_PHRASE),
    ],
)
def test_actor_error_text_keeps_chained_exceptions(
    procs2: Any, method: str, inner: str, outer: str, phrase: str
) -> None:
    one = procs2.spawn(f"err_chain_{method}", AsyncFaulty).slice(gpus=0)
    with pytest.raises(ActorError) as info:
        getattr(one, method).call_one().get(timeout=TIMEOUT)
    text = str(info.value)
    assert f"Actor call err_chain_{method}.{method} failed." in text
    assert TRACEBACK_HEADER in text
    assert inner in text
    assert outer in text
    assert phrase in text
    assert isinstance(info.value.exception, DeliberateError)


def test_actor_error_pickle_round_trip_keeps_message_and_exception(procs2: Any) -> None:
    one = procs2.spawn("err_pickle", AsyncFaulty).slice(gpus=0)
    with pytest.raises(ActorError) as info:
        one.fail.call_one("pickled failure").get(timeout=TIMEOUT)
    copy = pickle.loads(pickle.dumps(info.value))
    _check_actor_error(copy, "err_pickle", "pickled failure")


def test_argument_unpickling_failure_on_receiver_raises_actor_error(procs2: Any) -> None:
    one = procs2.spawn("err_unpickle", AsyncFaulty).slice(gpus=0)
    with pytest.raises(ActorError, match="cannot be unpickled here"):
        one.echo.call_one(LoadBomb()).get(timeout=TIMEOUT)
    assert one.ok.call_one().get(timeout=TIMEOUT) == "ok"


# --- Future semantics on real calls (§1.1.3) ----------------------------------------------------


def test_future_direct_construction_raises_type_error() -> None:
    with pytest.raises(TypeError):
        Future()


def test_future_get_timeout_raises_without_consuming(procs2: Any) -> None:
    one = procs2.spawn("err_future_timeout", Deferred).slice(gpus=0)
    pending = one.later.call_one()
    with pytest.raises(TimeoutError):
        pending.get(timeout=0.001)
    one.answer.call_one(5).get(timeout=TIMEOUT)
    assert pending.get(timeout=TIMEOUT) == 5
    assert pending.result(timeout=TIMEOUT) == 5


def test_future_repeated_get_returns_cached_value(procs2: Any) -> None:
    one = procs2.spawn("err_future_cached", Deferred).slice(gpus=0)
    future = one.numbers.call_one()
    first = future.get(timeout=TIMEOUT)
    assert first == [1, 2, 3]
    assert future.get(timeout=TIMEOUT) is first


def test_future_exception_returns_error_and_get_reraises_same_object(procs2: Any) -> None:
    one = procs2.spawn("err_future_exception", Deferred).slice(gpus=0)
    failing = one.fail.call_one()
    error = failing.exception(timeout=TIMEOUT)
    assert isinstance(error, ActorError)
    assert isinstance(error.exception, DeliberateError)
    with pytest.raises(ActorError) as info:
        failing.get(timeout=TIMEOUT)
    assert info.value is error
    assert one.numbers.call_one().exception(timeout=TIMEOUT) is None


@pytest.mark.parametrize(
    ("label", "timeout"), [("negative", -1.0), ("nan", math.nan), ("inf", math.inf)]
)
def test_future_get_invalid_timeout_raises_value_error(
    procs2: Any, label: str, timeout: float
) -> None:
    one = procs2.spawn(f"err_future_bad_timeout_{label}", Deferred).slice(gpus=0)
    future = one.numbers.call_one()
    with pytest.raises(ValueError):
        future.get(timeout=timeout)
    assert future.get(timeout=TIMEOUT) == [1, 2, 3]


def test_future_as_asyncio_without_running_loop_raises_runtime_error(procs2: Any) -> None:
    one = procs2.spawn("err_future_no_loop_asyncio", Deferred).slice(gpus=0)
    future = one.numbers.call_one()
    with pytest.raises(RuntimeError):
        future.as_asyncio()
    assert future.get(timeout=TIMEOUT) == [1, 2, 3]


def test_future_await_without_running_loop_raises_value_error(procs2: Any) -> None:
    one = procs2.spawn("err_future_no_loop_await", Deferred).slice(gpus=0)
    future = one.numbers.call_one()

    async def waiter() -> Any:
        return await future

    # Drive the coroutine by hand: there is no event loop running on this thread.
    with pytest.raises(ValueError, match="__await__ with no active event loop"):
        waiter().send(None)
    assert future.get(timeout=TIMEOUT) == [1, 2, 3]


async def test_future_awaited_twice_returns_same_value(procs2: Any) -> None:
    one = procs2.spawn("err_future_await_twice", Deferred).slice(gpus=0)
    pending = one.later.call_one()
    await one.answer.call_one("twice")
    assert await pending == "twice"
    assert await pending == "twice"


async def test_future_as_asyncio_returns_fresh_loop_futures(procs2: Any) -> None:
    one = procs2.spawn("err_future_as_asyncio", Deferred).slice(gpus=0)
    future = one.numbers.call_one()
    first = future.as_asyncio()
    second = future.as_asyncio()
    assert isinstance(first, asyncio.Future)
    assert first is not second
    assert await asyncio.wait_for(first, TIMEOUT) == [1, 2, 3]
    assert await asyncio.wait_for(second, TIMEOUT) == [1, 2, 3]
    assert await future == [1, 2, 3]


async def test_future_get_inside_running_loop_warns_and_returns(procs2: Any) -> None:
    one = procs2.spawn("err_future_get_in_loop", Deferred).slice(gpus=0)
    future = one.numbers.call_one()
    # A read with a timeout is torchmonarch's handle path, whose warning is worded so.
    with pytest.warns(
        UserWarning, match=r"Blocking get\(\) was called from a running asyncio event loop"
    ):
        assert future.get(timeout=TIMEOUT) == [1, 2, 3]
