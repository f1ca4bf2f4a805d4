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
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

from monarch._src.shape.extent import Point
from monarch._src.shape.mesh_trait import MeshTrait
from monarch._src.shape.shape import Shape

R = TypeVar("R")


class ValueMesh(MeshTrait, Generic[R]):
    """A value for every point of `shape`, with the mesh protocol (slice, flatten, ...)."""

    def __init__(self, shape: Shape, values: Sequence[R]) -> None:
        if not isinstance(shape, Shape):
            raise TypeError(f"ValueMesh needs a Shape, got {shape!r}.")
        values_l = list(values)
        if len(values_l) != len(shape):
            raise ValueError(
                f"ValueMesh over {shape.extent!r} needs {len(shape)} values, one per point in "
                f"row-major order, but got {len(values_l)}."
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

    def values(self) -> list[R]:
        """The values in row-major (local rank) order."""
        return list(self._values)

    def items(self) -> list[tuple[Point, R]]:
        """`(point, value)` pairs in row-major order; `point.rank` is the local index."""
        return list(self)

    def __iter__(self) -> Iterator[tuple[Point, R]]:
        extent = self._mesh_shape.extent
        for rank, value in enumerate(self._values):
            yield Point(rank, extent), value

    def get(self, rank: int) -> R:
        """The value at local row-major index `rank` (0 .. len - 1)."""
        index = operator.index(rank)
        if not -len(self._values) <= index < len(self._values):
            raise IndexError(
                f"Rank {index} is out of range for ValueMesh({self.extent!r}) of "
                f"{len(self._values)} values."
            )
        return self._values[index]

    def item(self, **coords: int) -> R:
        """The value at the given coordinates; every dimension must be named exactly once.

        With no dimensions (a 0-dimensional mesh, or after `slice` of every dim) call `item()`.
        """
        labels = self._mesh_shape.labels
        extra = [label for label in coords if label not in labels]
        if extra:
            raise KeyError(
                f"item has extra dimensions: {extra}; ValueMesh({self.extent!r}) has "
                f"dimensions {labels}."
            )
        missing = [label for label in labels if label not in coords]
        if missing:
            example = ", ".join(f"{label}=0" for label in labels)
            raise KeyError(
                f"item needs a coordinate for every dimension of ValueMesh({self.extent!r}); "
                f"missing {missing}. Pass them, e.g. item({example}), or slice the mesh first."
            )
        sizes = self._mesh_shape.ndslice.sizes
        position = 0
        for label, size in zip(labels, sizes):
            coord = operator.index(coords[label])
            if not 0 <= coord < size:
                raise IndexError(
                    f"Coordinate {label}={coord} is out of range for ValueMesh({self.extent!r}); "
                    f"pass a value in [0, {size})."
                )
            position = position * size + coord
        return self._values[position]

    def __len__(self) -> int:
        return len(self._values)

    def _repr_html_(self) -> str:
        from monarch._src.mesh.html import value_mesh_html

        return value_mesh_html(self.extent, list(self.values()))

    def __repr__(self) -> str:
        return f"ValueMesh({self.extent!r}):\n{pprint.pformat(self.items())}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ValueMesh, (self._mesh_shape, self._values))
