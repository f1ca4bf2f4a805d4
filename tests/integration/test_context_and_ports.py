"""`context()` and ports: what an actor learns about itself and the client, ports passed as
arguments (re-bound on arrival), and endpoints that answer through an explicit response port.

Every test spawns fresh actors on the session's shared proc meshes; no test here stops or
damages a proc.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from monarch.actor import (
    Actor,
    Channel,
    Port,
    ProcMesh,
    context,
    current_actor_name,
    current_rank,
    endpoint,
)

# Generous bound on any single remote wait: a bug fails the test instead of hanging it.
TIMEOUT = 30.0


class Introspect(Actor):
    @endpoint
    def describe(self) -> dict[str, Any]:
        ctx = context()
        instance = ctx.actor_instance
        return {
            "name": instance.name,
            "rank": instance.rank.rank,
            "class_name": instance.class_name,
            "creator": instance.creator.name,
            "str": str(instance),
            "actor_name": current_actor_name(),
            "message_rank": ctx.message_rank.rank,
            "current_rank": current_rank().rank,
            "pid": os.getpid(),
        }

    @endpoint
    def own_proc_meshes(self) -> tuple[bool, int, int, ProcMesh]:
        instance = context().actor_instance
        proc_mesh = instance.proc_mesh
        return isinstance(proc_mesh, ProcMesh), len(proc_mesh), len(instance.proc), proc_mesh


class PortUser(Actor):
    def __init__(self) -> None:
        # The reply port of the last `hold` call; None until one arrives.
        self._held: Port[int] | None = None

    @endpoint
    def send_from_thread(self, port: Port[int], n: int) -> int:
        worker = threading.Thread(target=lambda: [port.send(i) for i in range(n)])
        worker.start()
        worker.join()
        return n

    @endpoint
    def forward(self, port: Port[int], other: PortUser, n: int) -> int:
        return other.send_from_thread.call_one(port, n).get(timeout=TIMEOUT)

    @endpoint
    def raise_into(self, port: Port[int], message: str) -> None:
        port.exception(KeyError(message))

    @endpoint(explicit_response_port=True)
    def add_three(self, port: Port[int], b: int) -> None:
        port.send(3 + b)

    @endpoint(explicit_response_port=True)
    def hold(self, port: Port[int]) -> None:
        self._held = port

    @endpoint
    def fire(self, value: int) -> bool:
        assert self._held is not None
        self._held.send(value)
        return True


# --- context() (§1.1.8, §4.19) -------------------------------------------------------------------


def test_context_in_actor_reports_name_rank_class_and_creator(procs2: Any) -> None:
    mesh = procs2.spawn("ctx_introspected", Introspect)
    replies = list(mesh.describe.call().get(timeout=TIMEOUT).values())
    module = "tests.integration.test_context_and_ports"
    for rank, reply in enumerate(replies):
        assert reply["name"] == "ctx_introspected"
        assert reply["rank"] == rank
        assert reply["message_rank"] == rank
        assert reply["current_rank"] == rank
        assert reply["class_name"] == f"{module}.Introspect"
        assert reply["creator"] == "root"
        assert f"{module}.Introspect ctx_introspected{{'gpus': {rank}/2}}>" in reply["str"]
        assert reply["pid"] != os.getpid()


def test_current_actor_name_distinct_per_rank_and_mesh(procs2: Any) -> None:
    first = procs2.spawn("ctx_names_a", Introspect)
    second = procs2.spawn("ctx_names_b", Introspect)
    names = [
        reply["actor_name"]
        for mesh in (first, second)
        for reply in mesh.describe.call().get(timeout=TIMEOUT).values()
    ]
    assert len(set(names)) == 4


def test_context_on_client_is_root_instance() -> None:
    instance = context().actor_instance
    assert str(instance) == "<root>"
    assert instance.name == "root"


def test_instance_proc_mesh_is_spawnable_reference_to_same_procs(procs2: Any) -> None:
    mesh = procs2.spawn("ctx_proc_mesh_a", Introspect)
    replies = list(mesh.own_proc_meshes.call().get(timeout=TIMEOUT).values())
    assert [(is_pm, size, single) for is_pm, size, single, _ in replies] == [
        (True, 2, 1),
        (True, 2, 1),
    ]
    proc_mesh = replies[0][3]
    assert isinstance(proc_mesh, ProcMesh)
    again = proc_mesh.spawn("ctx_proc_mesh_b", Introspect)
    pids = [reply["pid"] for reply in again.describe.call().get(timeout=TIMEOUT).values()]
    original = [reply["pid"] for reply in mesh.describe.call().get(timeout=TIMEOUT).values()]
    assert pids == original


# --- ports (§1.1.6, §4.12, §4.13) ----------------------------------------------------------------


def test_port_argument_receives_hundred_sends_from_actor_thread_in_order(procs2: Any) -> None:
    one = procs2.spawn("ctx_port_thread", PortUser).slice(gpus=0)
    port, receiver = Channel[int].open()
    assert one.send_from_thread.call_one(port, 100).get(timeout=TIMEOUT) == 100
    assert [receiver.recv().get(timeout=TIMEOUT) for _ in range(100)] == list(range(100))


def test_port_forwarded_through_two_actors_still_reaches_client(procs2: Any) -> None:
    users = procs2.spawn("ctx_port_forward", PortUser)
    # Another sender may race ahead of __init__; the first call from the spawner settles it.
    assert list(users.add_three.call(0).get(timeout=TIMEOUT).values()) == [3, 3]
    port, receiver = Channel[int].open()
    forwarded = users.slice(gpus=0).forward.call_one(port, users.slice(gpus=1), 10)
    assert forwarded.get(timeout=TIMEOUT) == 10
    assert [receiver.recv().get(timeout=TIMEOUT) for _ in range(10)] == list(range(10))


def test_port_exception_raises_from_receiver(procs2: Any) -> None:
    one = procs2.spawn("ctx_port_exception", PortUser).slice(gpus=0)
    port, receiver = Channel[int].open()
    one.raise_into.call_one(port, "delivered").get(timeout=TIMEOUT)
    with pytest.raises(KeyError, match="delivered"):
        receiver.recv().get(timeout=TIMEOUT)


def test_explicit_response_port_answer_is_call_result(procs2: Any) -> None:
    users = procs2.spawn("ctx_explicit_port", PortUser)
    assert users.slice(gpus=0).add_three.call_one(2).get(timeout=TIMEOUT) == 5
    assert list(users.add_three.call(4).get(timeout=TIMEOUT).values()) == [7, 7]


def test_explicit_response_port_answered_by_later_message(procs2: Any) -> None:
    one = procs2.spawn("ctx_explicit_later", PortUser).slice(gpus=1)
    held = one.hold.call_one()
    assert one.fire.call_one(9).get(timeout=TIMEOUT) is True
    assert held.get(timeout=TIMEOUT) == 9
