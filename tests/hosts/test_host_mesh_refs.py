"""Host meshes as references: pickled to actors, sliced, shut down (torchmonarch's rules).

A host mesh sent elsewhere is a reference: it may spawn procs on the same hosts but never stop or
shut them down. Its native view (`_hy_host_mesh`, Monarch's Rust-side mesh) is dropped by
shutdown, and a slice's view is the owner's, sliced, once that resolves.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Iterator

import pytest

from monarch._src.actor.pickle import flatten, unflatten
from monarch._src.mesh.host_mesh import HostMesh
from monarch._src.runtime.pytokio import PythonTask
from monarch._src.shape import Shape, Slice
from monarch.actor import Actor, attach_to_workers, endpoint, this_host
from tests.hosts.conftest import Workers

TIMEOUT = 60.0


class Pid(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()


class Spawner(Actor):
    """Gets a host mesh as an argument and uses it from its own process."""

    @endpoint
    def spawn_on(self, hosts: HostMesh) -> list[int]:
        procs = hosts.spawn_procs(per_host={"gpus": 2})
        pids = procs.spawn("pid", Pid).pid.call().get(timeout=TIMEOUT)
        procs.stop().get(timeout=TIMEOUT)
        return sorted(pids.values())

    @endpoint
    def shutdown_refused(self, hosts: HostMesh) -> str:
        try:
            hosts.shutdown()
        except RuntimeError as exc:
            return str(exc)
        return "accepted"


@pytest.fixture
def spawner() -> Iterator[Spawner]:
    procs = this_host().spawn_procs(name="spawner")
    yield procs.spawn("spawner", Spawner)
    procs.stop().get(timeout=TIMEOUT)


@pytest.mark.timeout(120)
def test_host_mesh_pickled_in_process_is_an_unowned_reference_to_the_same_hosts() -> None:
    host = this_host()
    refs, frozen = flatten(host, lambda _: False)
    for copy in (pickle.loads(pickle.dumps(host)), unflatten(frozen.freeze(), refs)):
        assert isinstance(copy, HostMesh) and copy == host and copy.agent is host.agent
        with pytest.raises(RuntimeError, match="reference instead of owned"):
            copy.shutdown()
        with pytest.raises(RuntimeError, match="reference instead of owned"):
            copy.stop()
        procs = copy.spawn_procs(per_host={"gpus": 1})
        try:
            assert procs.spawn("pid", Pid).pid.call_one().get(timeout=TIMEOUT) != os.getpid()
        finally:
            procs.stop().get(timeout=TIMEOUT)


@pytest.mark.timeout(120)
def test_this_host_sent_to_an_actor_spawns_procs_on_this_machine(spawner: Spawner) -> None:
    pids = spawner.spawn_on.call_one(this_host()).get(timeout=TIMEOUT)
    assert len(set(pids)) == 2 and os.getpid() not in pids
    refused = spawner.shutdown_refused.call_one(this_host()).get(timeout=TIMEOUT)
    assert "reference instead of owned" in refused


@pytest.mark.timeout(120)
def test_attached_hosts_sent_to_an_actor_refuse_to_spawn_saying_where_to(
        two_workers: Workers, spawner: Spawner) -> None:
    hosts = attach_to_workers(ca="trust_all_connections", workers=two_workers.addresses)
    try:
        hosts.initialized.get(timeout=TIMEOUT)
        with pytest.raises(Exception, match="can only be driven by that process"):
            spawner.spawn_on.call_one(hosts).get(timeout=TIMEOUT)
    finally:
        hosts.shutdown().get(timeout=TIMEOUT)


@pytest.mark.timeout(120)
def test_host_mesh_shutdown_drops_its_native_view_and_refuses_more_use(
        two_workers: Workers) -> None:
    hosts = attach_to_workers(ca="trust_all_connections", workers=two_workers.addresses)
    sliced = hosts.slice(hosts=1)
    view = sliced._inner_host_mesh
    with pytest.raises(RuntimeError, match="reference instead of owned"):
        sliced.shutdown()
    assert sliced._inner_host_mesh is view
    hosts.shutdown().get(timeout=TIMEOUT)
    assert hosts._inner_host_mesh is None
    for use in (lambda: hosts._hy_host_mesh, hosts.spawn_procs, hosts.shutdown,
                lambda: sliced.spawn_procs()):
        with pytest.raises(RuntimeError, match="HostMesh has already been shut down"):
            use()
    with pytest.raises(RuntimeError, match="already been shut down"):
        pickle.loads(pickle.dumps(hosts)).spawn_procs()


@pytest.mark.timeout(60)
def test_sliced_host_mesh_native_view_waits_for_the_owners() -> None:
    whole = this_host()
    grid = HostMesh.from_agent(whole.agent, Shape(["hosts"], Slice.new_row_major([4])), True)
    resolved = grid._hy_host_mesh.block_on()
    release = threading.Event()

    async def later():  # type: ignore[no-untyped-def]
        await PythonTask.spawn_blocking(release.wait)
        return resolved

    grid._inner_host_mesh = PythonTask.from_coroutine(later()).spawn()
    region = Shape(["hosts"], Slice(offset=1, sizes=[2], strides=[2]))
    pending = grid._new_with_shape(region)
    assert pending._hy_host_mesh.poll() is None
    release.set()
    view = pending._hy_host_mesh.block_on()
    assert view.region.labels == ["hosts"] and view.region.slice() == region.ndslice
    assert grid._new_with_shape(grid._shape) is grid
