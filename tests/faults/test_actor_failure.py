"""Actors that fail while their procs live on (contract §2.1, §2.3, §2.4, §4.29-32).

An `Exception` nobody waits for (`broadcast`, `send` without a port), an `__init__` that raises, a
`BaseException` and `abort()` all fail the actor: its owner (the client here, so the fault hook)
gets a `MeshFailure` per failed rank, and later calls to the failed actors raise
`SupervisionError`. A result that cannot be pickled is only the caller's problem. The procs stay
healthy, so every test spawns fresh actors on the shared `procs2` mesh.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest

from monarch._src.supervision.errors import SupervisionError
from monarch.actor import Actor, ActorError, context, endpoint, send

# Generous bound on any single remote wait: a bug fails the test instead of hanging it.
TIMEOUT = 30.0
DESCENDANTS_FAILED = r"The actor .* and all its descendants have failed"


class DeliberateBaseError(BaseException):
    """A `BaseException` that is not an `Exception`, raised on purpose."""


class SyncFaulty(Actor):
    @endpoint
    def ping(self) -> str:
        return "pong"

    @endpoint
    def boom(self) -> None:
        raise ValueError("boom")

    @endpoint
    def raise_base(self, kind: str) -> None:
        if kind == "SystemExit":
            raise SystemExit("system exit from an endpoint")
        raise DeliberateBaseError("deliberate base error")

    @endpoint
    def abort(self, reason: str | None) -> str:
        if reason is None:
            context().actor_instance.abort()
        else:
            context().actor_instance.abort(reason)
        return "returned after abort"

    @endpoint
    def make_lock(self) -> Any:
        return threading.Lock()


class AsyncFaulty(Actor):
    @endpoint
    async def ping(self) -> str:
        return "pong"

    @endpoint
    async def boom(self) -> None:
        raise ValueError("boom")

    @endpoint
    async def raise_base(self, kind: str) -> None:
        raise DeliberateBaseError("deliberate base error")

    @endpoint
    async def make_lock(self) -> Any:
        return threading.Lock()


class SyncBadInit(Actor):
    def __init__(self) -> None:
        raise RuntimeError("init exploded (sync)")

    @endpoint
    def ping(self) -> str:
        return "pong"


class AsyncBadInit(Actor):
    async def __init__(self) -> None:
        raise RuntimeError("init exploded (async)")

    @endpoint
    async def ping(self) -> str:
        return "pong"


def _call_error(start: Any) -> SupervisionError:
    """The `SupervisionError` of a call, whether it is raised at the call site or by `get`."""
    with pytest.raises(SupervisionError) as info:
        start().get(timeout=TIMEOUT)
    return info.value


# --- an exception with no reply port fails the actor (§2.3, §4.29) ------------------------------


@pytest.mark.parametrize("adverb", ["broadcast", "send"])
@pytest.mark.parametrize("cls", [SyncFaulty, AsyncFaulty])
def test_exception_without_reply_port_reports_mesh_failure_per_rank_and_later_call_fails(
    procs2: Any, fault_recorder: Any, cls: type[Actor], adverb: str
) -> None:
    name = f"noport_{cls.__name__.lower()}_{adverb}"
    mesh = procs2.spawn(name, cls)
    assert list(mesh.ping.call().get(timeout=TIMEOUT).values()) == ["pong", "pong"]
    if adverb == "broadcast":
        mesh.boom.broadcast()
    else:
        send(mesh.boom, (), {})
    reports = fault_recorder.wait_for(2)
    for report in reports:
        assert "MeshFailure" in report
        assert f"mesh_name={name}," in report
        assert "crashed_ranks=[" in report
        assert "boom" in report
    assert sorted(re.findall(r"crashed_ranks=\[(\d)\]", "".join(reports))) == ["0", "1"]
    later = _call_error(lambda: mesh.ping.call())
    assert str(later).startswith(f"Endpoint call {name}.ping() failed,")
    assert "boom" in str(later)


# --- __init__ raising (§2.1, §4.30) --------------------------------------------------------------


@pytest.mark.parametrize("cls", [SyncBadInit, AsyncBadInit])
def test_init_exception_reports_each_rank_and_initialized_and_calls_fail(
    procs2: Any, fault_recorder: Any, cls: type[Actor]
) -> None:
    name = f"badinit_{cls.__name__.lower()}"
    flavour = "async" if cls is AsyncBadInit else "sync"
    mesh = procs2.spawn(name, cls)
    reports = fault_recorder.wait_for(len(procs2))
    assert len(reports) >= len(procs2)
    for report in reports:
        assert name in report
        assert f"init exploded ({flavour})" in report
    with pytest.raises(RuntimeError, match=name):
        mesh.initialized.get(timeout=TIMEOUT)
    later = _call_error(lambda: mesh.ping.call())
    assert str(later).startswith(f"Endpoint call {name}.ping() failed,")
    assert f"init exploded ({flavour})" in str(later)


def _refuse_to_rebuild() -> None:
    raise ValueError("cannot be rebuilt here")


class Unrebuildable:
    """Pickles, but raises where it is unpickled: a spawn argument the actor cannot decode."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (_refuse_to_rebuild, ())


def test_undecodable_spawn_arguments_fail_the_actor_without_an_internal_error(
    fault_recorder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # In this process (this_proc), so the actor thread's own log reaches caplog.
    from monarch.actor import this_proc

    mesh = this_proc().spawn("undecodable", SyncFaulty, Unrebuildable())
    later = _call_error(lambda: mesh.ping.call_one())
    assert "actor undecodable could not be created: ValueError('cannot be rebuilt here')" in str(
        later)
    [report] = fault_recorder.wait_for(1)
    assert "mesh_name=undecodable," in report
    # The failure was the actor's, not a bug of the runtime's message loop.
    assert not [r for r in caplog.records if "failed to handle a message" in r.getMessage()]


# --- BaseException (§2.3, §4.32) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "kind", "text"),
    [
        (SyncFaulty, "custom", "deliberate base error"),
        (AsyncFaulty, "custom", "deliberate base error"),
        (SyncFaulty, "SystemExit", "system exit from an endpoint"),
    ],
)
def test_base_exception_with_reply_port_raises_supervision_error_and_kills_actor(
    procs2: Any, fault_recorder: Any, cls: type[Actor], kind: str, text: str
) -> None:
    name = f"base_{cls.__name__.lower()}_{kind.lower()}"
    mesh = procs2.spawn(name, cls)
    one = mesh.slice(gpus=0)
    with pytest.raises(SupervisionError, match=DESCENDANTS_FAILED) as info:
        one.raise_base.call_one(kind).get(timeout=TIMEOUT)
    assert text in str(info.value)
    with pytest.raises(RuntimeError, match=DESCENDANTS_FAILED):
        one.ping.call_one().get(timeout=TIMEOUT)
    [report] = fault_recorder.wait_for(1)
    assert f"mesh_name={name}," in report
    assert "crashed_ranks=[0]" in report
    assert text in report
    # Only the actor that raised died.
    assert mesh.slice(gpus=1).ping.call_one().get(timeout=TIMEOUT) == "pong"


# --- abort() (§2.4) ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "expected"), [("why", "why"), (None, "no reason provided")], ids=["why", "none"]
)
def test_abort_in_endpoint_reports_reason_to_owner_and_later_call_fails(
    procs2: Any, fault_recorder: Any, reason: str | None, expected: str
) -> None:
    name = f"abort_{'none' if reason is None else reason}"
    one = procs2.spawn(name, SyncFaulty).slice(gpus=1)
    assert one.ping.call_one().get(timeout=TIMEOUT) == "pong"
    outcome = one.abort.call_one(reason).exception(timeout=TIMEOUT)
    # The endpoint's own reply may race the failure (contract §2.4): either is correct.
    assert outcome is None or isinstance(outcome, SupervisionError)
    [report] = fault_recorder.wait_for(1)
    assert f"mesh_name={name}," in report
    assert "crashed_ranks=[1]" in report
    assert expected in report
    later = _call_error(lambda: one.ping.call_one())
    assert expected in str(later)


# --- a result that cannot be pickled (§2.3) ------------------------------------------------------


@pytest.mark.parametrize("cls", [SyncFaulty, AsyncFaulty])
def test_unpicklable_return_value_raises_actor_error_and_actor_survives(
    procs2: Any, fault_recorder: Any, cls: type[Actor]
) -> None:
    name = f"unpicklable_{cls.__name__.lower()}"
    one = procs2.spawn(name, cls).slice(gpus=0)
    with pytest.raises(ActorError) as info:
        one.make_lock.call_one().get(timeout=TIMEOUT)
    assert info.value.message == f"Actor call {name}.make_lock failed."
    assert "pickle" in str(info.value)
    assert one.ping.call_one().get(timeout=TIMEOUT) == "pong"
    assert fault_recorder.texts == []
