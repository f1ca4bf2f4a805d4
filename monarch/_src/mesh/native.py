"""What torchmonarch's meshes hold as their Rust side, for code that reads it.

On Monarch `ProcMesh._proc_mesh` and `HostMesh._hy_host_mesh` are tasks that resolve to the
Rust mesh once the procs (hosts) are up, and code reads its `region`. Here the Python mesh is
the whole mesh; `native_view` gives the same shape of answer: a `Shared` that resolves, when
the mesh is up, to a `NativeMesh` whose `region` is the mesh's own (and whose `mesh` is the
mesh), or fails as the mesh's `initialized` does. `NativeMesh.sliced(region)` is the view a
slice of the mesh resolves to (`HostMesh._new_with_shape`, as Monarch slices its Rust mesh).
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

from monarch._src.runtime.pytokio import PythonTask, Shared
from monarch._src.shape import MeshTrait, Region

__all__ = ["NativeMesh", "native_view", "sliced_view"]


class NativeMesh:
    """A mesh seen as Monarch's Rust-side mesh: its `region` (labels and slice of ranks)."""

    __slots__ = ("_region", "mesh")

    def __init__(self, mesh: Any = None, region: Region | None = None) -> None:
        if not isinstance(mesh, MeshTrait):
            raise TypeError(
                "A Rust-side mesh is not made directly here: it is what a mesh's `_proc_mesh` "
                "(or a host mesh's `_hy_host_mesh`) resolves to. Get a proc mesh from "
                "this_host().spawn_procs(per_host={...})."
            )
        self.mesh: Any = mesh  # a ProcMesh or HostMesh
        self._region = region  # a slice's region; None: the whole mesh's

    @property
    def region(self) -> Region:
        if self._region is not None:
            return self._region
        return self.mesh._shape.region  # type: ignore[no-any-return]

    def sliced(self, region: Region) -> NativeMesh:
        """The view of the part of this mesh that `region` (of the mesh's ranks) names."""
        return NativeMesh(self.mesh, region)

    async def spawn_nonblocking(self, instance: Any, name: str, per_host: Any,
                                proc_bind: list[dict[str, str]] | None = None,
                                bootstrap: Any = None) -> NativeMesh:
        """Monarch's Rust-side spawn on a host mesh's view: procs on each host of this view,
        `per_host` an `Extent` of the per-host dimensions; the new proc mesh's view, at once
        (its procs come up in the background, as `spawn_procs`'s). `instance` is the caller
        (`context().actor_instance._as_rust()`), who owns the new procs here anyway."""
        from monarch._src.mesh.host_mesh import HostMesh

        hosts = self.mesh
        if not isinstance(hosts, HostMesh):
            raise TypeError(
                f"spawn_nonblocking spawns procs on hosts; {hosts!r} is not a host mesh."
            )
        if self._region is not None and self._region != hosts.region:
            hosts = hosts._new_with_shape(self._region.as_shape())
        procs = hosts.spawn_procs(
            per_host=dict(zip(per_host.labels, per_host.sizes)), name=name, proc_bind=proc_bind,
            bootstrap_command=bootstrap)  # Monarch's per-rank bootstrap command callable
        return NativeMesh(procs)

    def __repr__(self) -> str:
        return f"<NativeMesh of {self.mesh!r}>"


def native_view(mesh: Any, ready: concurrent.futures.Future[Any]) -> Shared[NativeMesh]:
    """A `Shared` resolving to `NativeMesh(mesh)` once `ready` does (its exception if it fails)."""
    view: concurrent.futures.Future[NativeMesh] = concurrent.futures.Future()

    def settle(done: concurrent.futures.Future[Any]) -> None:
        if done.cancelled():
            view.set_exception(RuntimeError(f"{mesh!r} was stopped before it came up"))
        elif done.exception() is not None:
            view.set_exception(done.exception())
        else:
            view.set_result(NativeMesh(mesh))

    ready.add_done_callback(settle)
    return Shared.from_concurrent(view)


def sliced_view(whole: Shared[NativeMesh], region: Region) -> Shared[NativeMesh]:
    """The view of a slice (`region`) of the mesh whose view is `whole`: sliced at once if
    `whole` resolved, else once it does (Monarch's pending path); a failed `whole` fails the
    slice's the same way, when awaited."""
    try:
        resolved = whole.poll()
    except Exception:  # a failed view: the slice's fails the same way, when awaited
        resolved = None
    if resolved is not None:
        return Shared.from_value(resolved.sliced(region))

    async def slice_when_resolved() -> NativeMesh:
        return (await whole).sliced(region)

    return PythonTask.from_coroutine(slice_when_resolved()).spawn()
