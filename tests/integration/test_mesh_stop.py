"""Stopping meshes: ProcMesh.stop (owned vs slice), ActorMesh.stop running `__cleanup__` and
stopping what the actor spawned, and stop refused on slices and references.

Tests that stop a proc mesh spawn a private one. Actor meshes are stopped on the shared procs:
stopping an actor mesh leaves its procs running.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from monarch.actor import (
    Actor,
    Channel,
    Port,
    ProcMesh,
    current_rank,
    endpoint,
    this_host,
    this_proc,
)

# Generous bound on any single remote wait: a bug fails the test instead of hanging it.
TIMEOUT = 30.0


class Pid(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()


class StopTrier(Actor):
    @endpoint
    async def try_stop(self, targets: Pid) -> str:
        try:
            await targets.stop()
        except NotImplementedError:
            return "NotImplementedError"
        return "stopped"


class Echo(Actor):
    @endpoint
    def echo(self, value: str) -> str:
        return value


class SyncCleaner(Actor):
    def __init__(self) -> None:
        self._port: Port[Any] | None = None
        self._echo: Echo | None = None
        self._rank = -1

    @endpoint
    def arm(self, port: Port[Any], echo: Echo) -> int:
        self._port, self._echo, self._rank = port, echo, current_rank().rank
        return self._rank

    def __cleanup__(self, exc: Exception | None) -> None:
        assert self._port is not None
        assert self._echo is not None
        echoed = self._echo.echo.call_one(f"sync {self._rank}").get(timeout=TIMEOUT)
        self._port.send((echoed, exc is None))


class AsyncCleaner(Actor):
    def __init__(self) -> None:
        self._port: Port[Any] | None = None
        self._echo: Echo | None = None
        self._rank = -1

    @endpoint
    async def arm(self, port: Port[Any], echo: Echo) -> int:
        self._port, self._echo, self._rank = port, echo, current_rank().rank
        return self._rank

    async def __cleanup__(self, exc: Exception | None) -> None:
        assert self._port is not None
        assert self._echo is not None
        echoed = await self._echo.echo.call_one(f"async {self._rank}")
        self._port.send((echoed, exc is None))


class Child(Actor):
    def __init__(self, label: str, port: Port[str]) -> None:
        self._label, self._port = label, port

    @endpoint
    def ping(self) -> str:
        return self._label

    def __cleanup__(self, exc: Exception | None) -> None:
        self._port.send(f"child {self._label}")


class Parent(Actor):
    def __init__(self) -> None:
        self._port: Port[str] | None = None
        # Meshes this actor owns; kept so nothing but the actor's own stop ends them.
        self._children: list[Child] = []

    @endpoint
    async def spawn_children(self, port: Port[str], foreign: ProcMesh) -> list[str]:
        self._port = port
        own = this_proc().spawn("stop_child_own", Child, "own", port)
        other = foreign.spawn("stop_child_foreign", Child, "foreign", port)
        self._children = [own, other]
        return [await own.ping.call_one(), await other.ping.call_one()]

    async def __cleanup__(self, exc: Exception | None) -> None:
        assert self._port is not None
        self._port.send("parent")


# --- ProcMesh.stop (§4.24, §4.35) ----------------------------------------------------------


@pytest.mark.slow
def test_proc_mesh_stopped_then_spawn_raises_already_stopped(fault_recorder: Any) -> None:
    procs = this_host().spawn_procs(per_host={"gpus": 1})
    procs.spawn("stop_before_stop", Pid).pid.call_one().get(timeout=TIMEOUT)
    assert procs.stop().get(timeout=TIMEOUT) is None
    # The error may come from spawn itself or, since spawn does not block, from initialized.
    with pytest.raises(RuntimeError, match="`ProcMesh` has already been stopped"):
        late = procs.spawn("stop_after_stop", Pid)
        late.initialized.get(timeout=TIMEOUT)


@pytest.mark.slow
def test_proc_mesh_slice_stop_raises_not_owned_and_owner_stop_succeeds() -> None:
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    with pytest.raises(ValueError, match="ProcMesh is not owned; must be stopped by an owner"):
        procs.slice(gpus=0).stop().get(timeout=TIMEOUT)
    pids = procs.spawn("stop_not_owned", Pid).pid.call().get(timeout=TIMEOUT)
    assert len(set(pids.values())) == 2
    assert procs.stop().get(timeout=TIMEOUT) is None


# --- ActorMesh.stop (§4.20, §2.10) ---------------------------------------------------------


@pytest.mark.parametrize(("cls", "tag"), [(SyncCleaner, "sync"), (AsyncCleaner, "async")])
def test_actor_mesh_stop_runs_cleanup_that_calls_other_actors(
    procs2: Any, cls: type[Actor], tag: str
) -> None:
    echo = this_proc().spawn(f"stop_cleanup_echo_{tag}", Echo)
    # The cleaners are other senders and may race ahead of __init__; settle it first.
    assert echo.echo.call_one("warm").get(timeout=TIMEOUT) == "warm"
    cleaners = procs2.spawn(f"stop_cleaner_{tag}", cls)
    port, receiver = Channel.open()
    assert list(cleaners.arm.call(port, echo).get(timeout=TIMEOUT).values()) == [0, 1]
    assert cleaners.stop().get(timeout=TIMEOUT) == ()
    reports = [receiver.recv().get(timeout=TIMEOUT) for _ in range(2)]
    assert sorted(reports) == [(f"{tag} 0", True), (f"{tag} 1", True)]


def test_actor_mesh_stop_stops_meshes_it_spawned_on_own_and_foreign_procs(
    procs2: Any, procs4: Any
) -> None:
    parent = procs2.slice(gpus=1).spawn("stop_parent", Parent)
    port, receiver = Channel[str].open()
    children = parent.spawn_children.call_one(port, procs4.slice(gpus=3)).get(timeout=TIMEOUT)
    assert children == ["own", "foreign"]
    assert parent.stop().get(timeout=TIMEOUT) == ()
    reports = {receiver.recv().get(timeout=TIMEOUT) for _ in range(3)}
    assert reports == {"child own", "child foreign", "parent"}


def test_actor_mesh_slice_stop_raises_not_implemented(procs2: Any) -> None:
    mesh = procs2.spawn("stop_slice_stop", Pid)
    mesh.pid.call().get(timeout=TIMEOUT)
    with pytest.raises(NotImplementedError):
        mesh.slice(gpus=0).stop().get(timeout=TIMEOUT)
    assert len(set(mesh.pid.call().get(timeout=TIMEOUT).values())) == 2


def test_actor_mesh_reference_stop_raises_not_implemented(procs2: Any) -> None:
    targets = procs2.spawn("stop_ref_targets", Pid)
    # Another sender may race ahead of __init__; the first call from the spawner settles it.
    assert len(targets.pid.call().get(timeout=TIMEOUT)) == 2
    trier = procs2.spawn("stop_ref_trier", StopTrier).slice(gpus=0)
    assert trier.try_stop.call_one(targets).get(timeout=TIMEOUT) == "NotImplementedError"
    assert len(targets.pid.call().get(timeout=TIMEOUT)) == 2
