"""`DeviceMesh`: the view of a proc mesh that tensors live on, and which mesh is active.

`with mesh.activate():` pushes the mesh on a stack and installs the dispatch mode, so torch
operations become commands for its procs; `no_mesh.activate()` pushes "no mesh", under which
torch runs locally and distributed tensors refuse to compute.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from monarch._src.shape import MeshTrait, Shape

if TYPE_CHECKING:
    from monarch._src.mesh.proc_mesh import ProcMesh
    from monarch._src.tensor.engine import Engine
    from monarch._src.tensor.tensor import Tensor

__all__ = [
    "DeviceMesh",
    "active_mesh_or_none",
    "device_mesh_of",
    "engine_of",
    "get_active_mesh",
    "no_mesh",
]

# Innermost last; None entries come from no_mesh.activate().
_stack: list[DeviceMesh | None] = []


def active_mesh_or_none() -> DeviceMesh | None:
    """The innermost active mesh, or None (nothing active, or `no_mesh` innermost)."""
    return _stack[-1] if _stack else None


def get_active_mesh() -> DeviceMesh:
    """The innermost active mesh; ValueError when none is active."""
    mesh = active_mesh_or_none()
    if mesh is None:
        raise ValueError(
            "no device mesh is active"
        )
    return mesh


class _NoMesh:
    """Pushing this turns dispatch off: torch runs locally until the block ends."""

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        """Run torch locally inside the block, even within an outer `activate()`."""
        _stack.append(None)
        try:
            yield
        finally:
            _stack.pop()

    def __repr__(self) -> str:
        return "no_mesh"


no_mesh = _NoMesh()


def engine_of(mesh: DeviceMesh | ProcMesh) -> Engine:
    """The tensor engine behind `mesh` (a proc mesh's root engine is made on first use)."""
    if isinstance(mesh, DeviceMesh):
        return mesh._engine
    from monarch._src.tensor.engine import engine_for

    return engine_for(mesh)


def device_mesh_of(proc_mesh: ProcMesh) -> DeviceMesh:
    """The `DeviceMesh` over the procs of `proc_mesh` (a view of its root mesh's engine, which
    is made, workers spawned, on first use). `_shape` is the `MeshTrait` protocol's accessor."""
    from monarch._src.tensor.engine import engine_for

    return engine_for(proc_mesh).root_mesh._new_with_shape(proc_mesh._shape)


class DeviceMesh(MeshTrait):
    """A view (possibly sliced) of an engine's procs: what distributed tensors live on."""

    _engine: Engine  # the engine of the proc mesh this is a view of
    _mesh_shape: Shape  # over the proc table's global ranks
    _ranks: tuple[int, ...] | bool | None  # engine ranks (None: all); False until computed

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "DeviceMesh cannot be constructed directly. Use proc_mesh.activate() or "
            "monarch.get_active_mesh()."
        )

    @classmethod
    def _create(cls, engine: Engine, shape: Shape) -> DeviceMesh:
        mesh = object.__new__(cls)
        mesh._engine = engine
        mesh._mesh_shape = shape
        mesh._ranks = False
        return mesh

    @property
    def _shape(self) -> Shape:
        return self._mesh_shape

    def _new_with_shape(self, shape: Shape) -> DeviceMesh:
        return DeviceMesh._create(self._engine, shape)

    @property
    def engine_ranks(self) -> tuple[int, ...] | None:
        """Engine ranks of this view (None: every proc of the engine)."""
        if self._ranks is False:
            self._ranks = self._engine.ranks_of(self)
        return self._ranks  # type: ignore[return-value]

    def _same(self, other: DeviceMesh) -> bool:
        return self is other or (
            self._engine is other._engine
            and self.engine_ranks == other.engine_ranks
            and tuple(self._shape.labels) == tuple(other._shape.labels)
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeviceMesh) and self._same(other)

    def __hash__(self) -> int:
        return hash((id(self._engine), self.engine_ranks, tuple(self._shape.labels)))

    @contextlib.contextmanager
    def activate(self) -> Iterator[DeviceMesh]:
        """Inside the block torch operations run on every proc of this mesh."""
        from monarch._src.tensor.dispatch import mesh_mode

        _stack.append(self)
        try:
            with mesh_mode():
                yield self
        finally:
            _stack.pop()
            if not self._engine.closed:
                self._engine.flush()

    def __call__(self, **dims: Any) -> DeviceMesh:
        """Deprecated spelling of `slice`."""
        return self.slice(**dims)

    def rank(self, dim: str | tuple[str, ...]) -> Tensor:
        """A distributed int64 scalar: each proc's coordinate along `dim` (row-major over
        several dims)."""
        from monarch._src.tensor.remote import mesh_coordinate

        return mesh_coordinate(self, (dim,) if isinstance(dim, str) else tuple(dim))

    @property
    def ranks(self) -> dict[str, Tensor]:
        """Dimension -> `rank(dimension)`."""
        return {label: self.rank(label) for label in self._shape.labels}

    def process_group(self, dims: str | tuple[str, ...]) -> Any:
        """A `RemoteProcessGroup` over `dims`, usable as an argument to remote functions."""
        from monarch._src.tensor.remote import RemoteProcessGroup

        return RemoteProcessGroup._create(self, (dims,) if isinstance(dims, str) else tuple(dims))

    def to_table(self) -> str:
        """A text table: coordinates of every point and the engine rank that serves it."""
        labels = list(self._shape.labels)
        rows = [" ".join([*labels, "rank"])]
        for g in self._shape.ranks():
            values = [str(c) for c in self._shape.coordinates(g).values()]
            rows.append(" ".join([*values, str(self._engine.rank_of[g])]))
        return "\n".join(rows)

    def exit(self) -> None:
        """Release the workers' values and close the engine (a later activate starts anew)."""
        self._engine.exit()

    def __repr__(self) -> str:
        names = tuple(self._shape.labels)
        procs = [self._engine.rank_of[g] for g in self._shape.ranks()]
        return f"<DeviceMesh(names({names!r}), processes({procs!r})) at {id(self):#x}>"
