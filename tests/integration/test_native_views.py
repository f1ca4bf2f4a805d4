"""A proc mesh's native view (torchmonarch's `ProcMesh._proc_mesh`) and this_proc() as a served
proc mesh.

On Monarch `_proc_mesh` is the task resolving to the Rust-side mesh: code may replace it, pickling
the mesh waits for it, spawning actors does not, and a slice's resolves from its owner's.
"""

from __future__ import annotations

import os
import pickle
import threading

import pytest

from monarch._src.runtime.pytokio import PythonTask
from monarch._src.shape import Shape, Slice
from monarch.actor import Actor, context, endpoint, get_or_spawn_controller, this_host

TIMEOUT = 30.0


class Pid(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()


class OwnProcMesh(Actor):
    @endpoint
    def spawn_here(self) -> Pid:
        return context().actor_instance.proc_mesh.spawn("pid", Pid)


@pytest.mark.timeout(60)
def test_proc_mesh_native_view_is_settable_and_pickling_waits_for_it() -> None:
    pm = this_host().spawn_procs(per_host={"gpus": 2, "x": 2}, name="views")
    try:
        resolved = pm._proc_mesh.block_on()
        release = threading.Event()

        async def later():  # type: ignore[no-untyped-def]
            await PythonTask.spawn_blocking(release.wait)
            return resolved

        pm._proc_mesh = PythonTask.from_coroutine(later()).spawn()
        assert pm._proc_mesh.poll() is None
        # spawning does not wait for the view
        pids = pm.spawn("pid", Pid)
        assert pm._proc_mesh.poll() is None
        # a slice's view is the owner's, sliced, once that resolves
        region = Shape(["gpus", "x"], Slice(offset=1, sizes=[2, 1], strides=[2, 1]))
        sliced = pm._new_with_shape(region)
        assert sliced._proc_mesh.poll() is None
        # pickling waits for it: once pickled, the view has resolved
        release.set()
        pickle.dumps(pm)
        assert pm._proc_mesh.poll() is resolved
        view = sliced._proc_mesh.block_on()
        assert view.region.labels == ["gpus", "x"] and view.region.slice() == region.ndslice
        assert len(set(pids.pid.call().get(timeout=TIMEOUT).values())) == 4
    finally:
        pm.stop().get(timeout=TIMEOUT)


@pytest.mark.timeout(60)
def test_controller_spawns_on_its_own_proc_mesh_in_the_client_process() -> None:
    controller = get_or_spawn_controller("own_proc_mesh", OwnProcMesh).get(timeout=TIMEOUT)
    spawned = controller.spawn_here.call_one().get(timeout=TIMEOUT)
    assert spawned.pid.call_one().get(timeout=TIMEOUT) == os.getpid()


@pytest.mark.timeout(60)
def test_host_native_view_spawns_procs_without_blocking() -> None:
    from monarch._src.mesh.context import binding_instance
    from monarch._src.shape import Extent

    async def spawn():  # type: ignore[no-untyped-def]
        hosts = await this_host()._hy_host_mesh
        return await hosts.spawn_nonblocking(binding_instance(context().actor_instance),
                                             "native", Extent(["replicas"], [2]))

    view = PythonTask.from_coroutine(spawn()).block_on()
    pm = view.mesh
    try:
        assert view.region.labels == ["replicas"] and "ProcMesh" in str(view)
        pids = pm.spawn("pid", Pid).pid.call().get(timeout=TIMEOUT)
        assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
    finally:
        pm.stop().get(timeout=TIMEOUT)
