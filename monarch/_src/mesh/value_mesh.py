"""`ValueMesh`: one value per point of a mesh, as returned by `endpoint.call()`.

A value mesh pairs a `Shape` with a list of values in the shape's row-major order, so it obeys
the same mesh protocol as the actor mesh that produced it: `vm.slice(gpus=0)` keeps the values
of the remaining points, `vm.flatten("r").slice(r=0).item()` picks the first one.

Design note: each slice copies out the values it keeps (found through the global ranks both
shapes share) instead of sharing one backing list plus an index map. Results are small and
usually read once, and a self-contained list keeps pickling and equality trivial.
"""

from __future__ import annotations

import operator
import pprint
import textwrap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

from monarch._src.mesh.html import value_mesh_html
from monarch._src.shape.extent import Point
from monarch._src.shape.mesh_trait import MeshTrait
from monarch._src.shape.shape import Shape
from monarch._src.shape.slice import NEGATIVE

R = TypeVar("R")


class ValueMesh(MeshTrait, Generic[R]):
    """A value for every point of `shape`, with the mesh protocol (slice, flatten, ...).

    A value, not a container to annotate: no other attributes can be set, and `ValueMesh[T]` is
    `ValueMesh` itself at run time (as on Monarch)."""

    __slots__ = ("_mesh_shape", "_values")

    def __class_getitem__(cls, item: Any) -> Any:
        return cls

    def __init__(self, shape: Shape, values: Sequence[R]) -> None:
        if not isinstance(shape, Shape):
            raise TypeError(f"ValueMesh needs a Shape, got {shape!r}.")
        values_l = list(values)
        if len(values_l) != len(shape):
            raise ValueError(
                f"invalid value mesh: expected {len(shape)} ranks, but contains "
                f"{len(values_l)} ranks"
            )
        # _values[i] belongs to the i-th global rank of _mesh_shape in row-major order.
        self._mesh_shape: Shape = shape
        self._values: list[R] = values_l

    @classmethod
    def _from_global_ranks(cls, shape: Shape, by_rank: Mapping[int, R]) -> ValueMesh[R]:
        """Build from values keyed by global rank; every rank of `shape` must have one."""
        missing = [rank for rank in shape.ranks() if rank not in by_rank]
        if missing:
            raise ValueError(
                f"ValueMesh over {shape.extent!r} has no value for global ranks {missing}; "
                "supply one value per rank of the shape."
            )
        return cls(shape, [by_rank[rank] for rank in shape.ranks()])

    @property
    def _shape(self) -> Shape:
        return self._mesh_shape

    def _new_with_shape(self, shape: Shape) -> ValueMesh[R]:
        ndslice = self._mesh_shape.ndslice
        try:
            values = [self._values[ndslice.index(rank)] for rank in shape.ranks()]
        except ValueError:
            raise ValueError(
                f"Cannot view {self._mesh_shape!r} as {shape!r}: the new shape covers ranks "
                "this ValueMesh has no value for."
            ) from None
        return ValueMesh(shape, values)

    @classmethod
    def from_indexed(cls, shape: Shape, pairs: Iterable[tuple[int, R]]) -> ValueMesh[R]:
        """Build from `(local rank, value)` pairs in any order; every rank needs a value, and a
        rank given twice keeps its last value (as on Monarch)."""
        values: dict[int, R] = {}
        for rank, value in pairs:
            index = operator.index(rank)
            if not 0 <= index < len(shape):
                raise ValueError(
                    f"ValueMesh.from_indexed got rank {index}, outside the {len(shape)} ranks "
                    f"of {shape}."
                )
            values[index] = value
        if len(values) != len(shape):
            missing = [rank for rank in range(len(shape)) if rank not in values]
            # Monarch's words first ("expected N ranks, but contains M ranks"), then which.
            raise ValueError(
                f"invalid value mesh: expected {len(shape)} ranks, but contains {len(values)} "
                f"ranks: ValueMesh.from_indexed has no value for ranks {missing} of {shape}; "
                "pass a pair for every rank."
            )
        return cls(shape, [values[rank] for rank in range(len(shape))])

    def values(self) -> list[R]:
        """The values in row-major (local rank) order."""
        return list(self._values)

    def items(self) -> Iterator[tuple[Point, R]]:
        """Yield `(point, value)` pairs in row-major order; `point.rank` is the local index."""
        extent = self._mesh_shape.extent
        for rank, value in enumerate(self._values):
            yield Point(rank, extent), value

    def __iter__(self) -> Iterator[tuple[Point, R]]:
        return self.items()

    def get(self, rank: int) -> R:
        """The value at local row-major index `rank` (0 .. len - 1)."""
        index = operator.index(rank)
        if index < 0:
            raise OverflowError(NEGATIVE)
        if index >= len(self._values):
            raise ValueError(f"index {index} out of range (len={len(self._values)})")
        return self._values[index]

    def item(self, **coords: int) -> R:
        """The value at the given coordinates; every dimension must be named exactly once.

        With no dimensions (a 0-dimensional mesh, or after `slice` of every dim) call `item()`.
        A missing dimension raises KeyError naming it, an extra one KeyError listing them, and
        coordinates outside the mesh IndexError (Monarch's errors).
        """
        wanted = [coords.pop(label) for label in self._mesh_shape.labels]
        if coords:
            raise KeyError(f"item has extra dimensions: {list(coords)}")
        ndslice = self._mesh_shape.ndslice
        rank = ndslice.nditem(wanted)
        if rank not in ndslice or ndslice.coordinates(rank) != wanted:
            raise IndexError(f"rank {rank} not in current shape")
        return self._values[ndslice.index(rank)]

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, key: object) -> None:
        # Not indexable, as on Monarch (use item(**coords) or get(rank)); the message is the
        # interpreter's for Monarch's class, whose name carries its module path.
        raise TypeError("'monarch._src.actor.actor_mesh.ValueMesh' object is not subscriptable")

    def _repr_html_(self) -> str:
        return value_mesh_html(self.extent, list(self.values()))

    def __repr__(self) -> str:
        # Monarch's form: the extent, then the pformat of the (point, value) tuple, indented.
        body = textwrap.indent(pprint.pformat(tuple(self.items())), "  ")
        return f"ValueMesh({self.extent!r}):\n{body}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ValueMesh, (self._mesh_shape, self._values))
