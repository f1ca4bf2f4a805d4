"""No call is left hanging when its actor fails (contract §2.3, §2.4; issue 14).

When an actor fails, every call still waiting on it resolves at once with a `SupervisionError`
naming the failure, whatever the endpoint kind and whoever holds the reply port: the call whose
explicit response port the endpoint never used (sync, async, `@concurrent_endpoint`), a port a
thread keeps, a port handed on to another actor that then fails, `call` and `stream` over ranks
of which one fails, calls queued behind the failing message, and a `Channel` receiver whose port
the failed actor held. Every wait is bounded, so a regression fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from monarch._src.supervision.errors import SupervisionError
from monarch.actor import (
    Actor,
    ActorError,
    Channel,
    concurrent_endpoint,
    context,
    current_rank,
    endpoint,
)

# Generous bound on any single remote wait: a hang fails the test instead of blocking it.
TIMEOUT = 30.0
FAILED = "and all its descendants have failed:\n  actor explicitly aborted due to: Traceback"


class Fatal(BaseException):
    """Not an `Exception`: always fails the actor."""


class SyncPorts(Actor):
    @endpoint
    def ping(self) -> str:
        return "pong"

    @endpoint(explicit_response_port=True)
    def explicit_raises(self, port: Any, x: int) -> None:
        raise ValueError(f"explicit sync {x}")

    @endpoint(explicit_response_port=True)
    def rank1_fails(self, port: Any) -> None:
        if current_rank().rank == 1:
            raise ValueError("rank 1 failed")
        port.send(current_rank().rank)

    @endpoint(explicit_response_port=True)
    def thread_keeps_port(self, port: Any) -> None:
        never = threading.Event()
        threading.Thread(target=lambda kept=port: never.wait(), daemon=True).start()
        raise ValueError("the thread keeps the port")

    @endpoint(explicit_response_port=True)
    def relay(self, port: Any, other: Any) -> None:
        other.keep.call_one(port).get(timeout=TIMEOUT)

    @endpoint
    def keep(self, port: Any) -> None:
        self.kept = port

    @endpoint
    def fail(self, port: Any = None) -> None:
        self.kept = port
        raise Fatal("the holder failed")

    @endpoint
    def aborted_from_a_thread_while_blocked(self) -> None:
        instance = context().actor_instance
        threading.Thread(target=instance.abort, args=("aborted by a thread",), daemon=True).start()
        # This message keeps running (until the test opens the gate) after the actor failed.
        self.gate.recv().get(timeout=TIMEOUT)

    @endpoint
    def open_gate(self) -> Any:
        port, self.gate = Channel.open()
        return port

    @endpoint
    def blocked_then_fatal(self) -> None:
        self.gate.recv().get(timeout=TIMEOUT)
        raise Fatal("failed with calls queued")


class AsyncPorts(Actor):
    @endpoint
    async def ping(self) -> str:
        return "pong"

    @endpoint(explicit_response_port=True)
    async def explicit_raises(self, port: Any, x: int) -> None:
        await asyncio.sleep(0)
        raise ValueError(f"explicit async {x}")

    @concurrent_endpoint(explicit_response_port=True)
    async def concurrent_raises(self, port: Any, x: int) -> None:
        raise ValueError(f"explicit concurrent {x}")

    @concurrent_endpoint
    async def concurrent_waits(self) -> None:
        await asyncio.Event().wait()

    @endpoint
    async def fatal(self) -> None:
        raise Fatal("failed with a concurrent call running")

    @concurrent_endpoint
    async def concurrent_fatal(self) -> None:
        raise Fatal("inside a concurrent endpoint")


def _supervision_error(fut: Any) -> SupervisionError:
    with pytest.raises(SupervisionError) as info:
        fut.get(timeout=TIMEOUT)
    return info.value


def _failure_text(fut: Any, fault_recorder: Any) -> str:
    """The text of the `SupervisionError` that fut resolves with, once the fault hook has heard
    of the failure too (one report: the actor failed once)."""
    err = _supervision_error(fut)
    fault_recorder.wait_for(1)
    return str(err)


@pytest.mark.parametrize(
    ("cls", "method", "text"),
    [
        (SyncPorts, "explicit_raises", "ValueError: explicit sync 7"),
        (AsyncPorts, "explicit_raises", "ValueError: explicit async 7"),
        (AsyncPorts, "concurrent_raises", "ValueError: explicit concurrent 7"),
    ],
    ids=["sync", "async", "concurrent"],
)
def test_explicit_port_endpoint_raising_resolves_call_with_supervision_error(
    procs2: Any, fault_recorder: Any, cls: type[Actor], method: str, text: str
) -> None:
    name = f"pending_{cls.__name__.lower()}_{method}"
    mesh = procs2.spawn(name, cls).slice(gpus=0)
    err = _supervision_error(getattr(mesh, method).call_one(7))
    assert str(err).startswith(f"Endpoint call {name}.{method}() failed, The actor <root>.<")
    assert FAILED in str(err) and str(err).endswith(f"  {text}\n")
    [report] = fault_recorder.wait_for(1)
    assert report.startswith(f"MeshFailure(mesh_name={name}, crashed_ranks=[0], event="
                             "Supervision event: actor <root>.<")
    assert text in report
    later = _supervision_error(mesh.ping.call_one())
    assert str(later) == str(err).replace(f"{method}()", "ping()")


def test_call_over_ranks_where_one_fails_raises_that_ranks_failure(
    procs2: Any, fault_recorder: Any
) -> None:
    mesh = procs2.spawn("pending_gather", SyncPorts)
    err = _failure_text(mesh.rank1_fails.call(), fault_recorder)
    assert "pending_gather{'gpus': 1/2}>" in err and "rank 1 failed" in err
    assert mesh.slice(gpus=0).ping.call_one().get(timeout=TIMEOUT) == "pong"


def test_stream_where_one_rank_fails_yields_value_and_error_once_each(
    procs2: Any, fault_recorder: Any
) -> None:
    mesh = procs2.spawn("pending_stream", SyncPorts)
    outcomes = []
    for fut in mesh.rank1_fails.stream():
        try:
            outcomes.append(fut.get(timeout=TIMEOUT))
        except SupervisionError as err:
            outcomes.append(type(err).__name__)
    assert sorted(outcomes, key=str) == [0, "SupervisionError"]
    fault_recorder.wait_for(1)


def test_port_kept_by_a_thread_resolves_when_the_endpoint_raises(
    procs2: Any, fault_recorder: Any
) -> None:
    mesh = procs2.spawn("pending_thread", SyncPorts).slice(gpus=1)
    err = _failure_text(mesh.thread_keeps_port.call_one(), fault_recorder)
    assert "the thread keeps the port" in err


def test_explicit_port_handed_to_another_actor_resolves_when_that_actor_fails(
    procs2: Any, fault_recorder: Any
) -> None:
    relayer = procs2.spawn("pending_relayer", SyncPorts).slice(gpus=0)
    keeper = procs2.spawn("pending_keeper", SyncPorts).slice(gpus=1)
    pending = relayer.relay.call_one(keeper)
    # The relayer handles one message at a time: once ping answers, the keeper holds the port.
    assert relayer.ping.call_one().get(timeout=TIMEOUT) == "pong"
    keeper.fail.broadcast()
    err = _failure_text(pending, fault_recorder)
    assert err.startswith("Endpoint call pending_relayer.relay() failed, The actor <root>.<")
    assert "pending_keeper{'gpus': 1/2}>" in err and "the holder failed" in err
    assert relayer.ping.call_one().get(timeout=TIMEOUT) == "pong"


def test_channel_receiver_resolves_when_the_actor_holding_its_port_fails(
    procs2: Any, fault_recorder: Any
) -> None:
    mesh = procs2.spawn("pending_channel", SyncPorts).slice(gpus=0)
    port, receiver = Channel.open()
    waiting = receiver.recv()
    mesh.fail.broadcast(port)
    err = _failure_text(waiting, fault_recorder)
    assert "pending_channel{'gpus': 0/2}>" in err and "the holder failed" in err


def test_calls_queued_behind_a_failing_message_all_resolve(
    procs2: Any, fault_recorder: Any
) -> None:
    mesh = procs2.spawn("pending_queue", SyncPorts).slice(gpus=0)
    gate_port = mesh.open_gate.call_one().get(timeout=TIMEOUT)
    first = mesh.blocked_then_fatal.call_one()
    queued = [mesh.ping.call_one() for _ in range(3)]
    gate_port.send(None)  # the calls above are queued behind the blocked one by now (FIFO)
    errors = [_supervision_error(f) for f in [first, *queued]]
    assert all("failed with calls queued" in str(e) for e in errors)
    assert [str(e).split(" failed,")[0] for e in errors] == [
        "Endpoint call pending_queue.blocked_then_fatal()",
        *["Endpoint call pending_queue.ping()"] * 3,
    ]
    fault_recorder.wait_for(1)


def test_running_concurrent_call_resolves_when_its_actor_fails(
    procs2: Any, fault_recorder: Any
) -> None:
    mesh = procs2.spawn("pending_concurrent", AsyncPorts).slice(gpus=1)
    running = mesh.concurrent_waits.call_one()
    assert mesh.ping.call_one().get(timeout=TIMEOUT) == "pong"  # the concurrent body started
    mesh.fatal.broadcast()
    assert "failed with a concurrent call running" in _failure_text(running, fault_recorder)


def test_concurrent_endpoint_base_exception_is_forwarded_and_actor_lives(
    procs2: Any, fault_recorder: Any
) -> None:
    mesh = procs2.spawn("pending_concurrent_base", AsyncPorts).slice(gpus=0)
    with pytest.raises(ActorError) as info:
        mesh.concurrent_fatal.call_one().get(timeout=TIMEOUT)
    assert info.value.message == (
        "Actor call pending_concurrent_base.concurrent_fatal failed with BaseException.")
    assert isinstance(info.value.exception, Fatal)
    assert mesh.ping.call_one().get(timeout=TIMEOUT) == "pong"
    assert fault_recorder.texts == []


def test_actor_answers_for_a_bounded_number_of_multi_use_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Unit-level: no process. A HostedActor keeps only the newest multi-use ports it received.
    from monarch._src.mesh import hosted
    from monarch._src.mesh.port import Port

    monkeypatch.setattr(hosted, "_HELD_PORTS_MAX", 3)
    actor = object.__new__(hosted.HostedActor)
    actor._owed, actor._held, actor._owed_lock = {}, hosted.OrderedDict(), threading.Lock()
    for i in range(5):
        actor.port_received(Port._create(("tcp://peer", i)))
    reply = Port._create(("tcp://peer", 99), 0, once=True)
    actor.port_received(reply)
    assert sorted(actor._owed) == [(("tcp://peer", i), None) for i in (2, 3, 4)] + [
        (("tcp://peer", 99), 0)]
    actor.port_used(reply)  # a reply port is settled by its answer; multi-use ones are kept
    actor.port_used(Port._create(("tcp://peer", 4)))
    assert sorted(actor._owed) == [(("tcp://peer", i), None) for i in (2, 3, 4)]


def test_choose_over_ranks_that_all_fail_resolves_with_supervision_error(
    procs2: Any, fault_recorder: Any
) -> None:
    mesh = procs2.spawn("pending_choose", SyncPorts)
    err = _failure_text(mesh.explicit_raises.choose(3), fault_recorder)
    assert err.startswith("Endpoint call pending_choose.explicit_raises() failed, The actor")
    assert "ValueError: explicit sync 3" in err


def test_actor_failed_from_another_thread_answers_calls_while_its_message_still_runs(
    procs2: Any, fault_recorder: Any
) -> None:
    mesh = procs2.spawn("pending_blocked", SyncPorts).slice(gpus=1)
    gate_port = mesh.open_gate.call_one().get(timeout=TIMEOUT)
    blocked = mesh.aborted_from_a_thread_while_blocked.call_one()
    fault_recorder.wait_for(1)  # failed; its thread is still inside the blocked message
    try:
        for fut in [blocked, mesh.ping.call_one(), mesh.ping.call_one()]:
            with pytest.raises(SupervisionError, match="aborted by a thread"):
                fut.get(timeout=TIMEOUT)
    finally:
        gate_port.send(None)  # let the blocked message end
