"""torchmonarch's `monarch._testing`: `TestingContext`, local device meshes for tests.

`TestingContext().local_device_mesh(hosts, gpus)` brings up `hosts` local hosts (a
`ProcessJob`), spawns `gpus` procs on each, and yields the tensor engine's `DeviceMesh` over them
with dimensions `host` and `gpu` (activated unless `activate=False`). Proc meshes are cached per
`(hosts, gpus)` for the context's lifetime, so tests reuse their workers; leaving the context
stops them. `mock_mesh` (Monarch's mesh over a mock controller) has no counterpart: the simulator
(`monarch.simulator`) is the engine without workers here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["TestingContext", "mock_mesh"]


class TestingContext:
    """Local device meshes for tests, with the procs behind them cached (see the module note)."""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self.cleanup = contextlib.ExitStack()
        # (hosts, gpus per host) -> the proc mesh spawned for it; stopped at __exit__.
        self._proc_mesh_cache: dict[tuple[int, int], Any] = {}

    @contextlib.contextmanager
    def local_engine_on_proc_mesh(self, num_hosts: int, gpu_per_host: int) -> Iterator[Any]:
        """The `DeviceMesh` (dims `host`, `gpu`) over cached procs; its engine exits after."""
        from monarch._src.job.process import ProcessJob
        from monarch.mesh_controller import spawn_tensor_engine

        key = (num_hosts, gpu_per_host)
        if key not in self._proc_mesh_cache:
            hosts = ProcessJob({"hosts": num_hosts}).state(cached_path=None).hosts
            procs = hosts.spawn_procs(per_host={"gpus": gpu_per_host})
            self._proc_mesh_cache[key] = procs
            self.cleanup.callback(lambda: procs.stop().get())
        dm = spawn_tensor_engine(self._proc_mesh_cache[key]).rename(hosts="host", gpus="gpu")
        yield dm
        dm.exit()

    @contextlib.contextmanager
    def local_device_mesh(
        self,
        num_hosts: int,
        gpu_per_host: int,
        activate: bool = True,
        backend: str = "py",
        controller_params: Any = None,
    ) -> Iterator[Any]:
        """`local_engine_on_proc_mesh`, activated unless `activate=False` (`backend` and
        `controller_params` choose between Monarch's engines; there is one engine here)."""
        with self.local_engine_on_proc_mesh(num_hosts, gpu_per_host) as dm:
            if activate:
                with dm.activate():
                    yield dm
            else:
                yield dm

    def __enter__(self) -> TestingContext:
        return self

    def __exit__(self, *args: Any) -> None:
        self.cleanup.__exit__(*args)


def mock_mesh(hosts: int, gpus: int) -> Any:
    """Monarch's device mesh over a mock controller; not available here."""
    raise NotImplementedError(
        "mock_mesh() (a DeviceMesh over Monarch's mock controller) does not exist here. Use "
        "monarch.simulator.Simulator for an engine without workers, or "
        "TestingContext().local_device_mesh(hosts, gpus) for real local workers."
    )
