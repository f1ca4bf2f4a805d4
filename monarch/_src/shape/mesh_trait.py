"""`MeshTrait`: the named-dimension mesh protocol shared by every mesh type.

A mesh type supplies two things, its current `Shape` and a way to rebuild itself around another
shape over the same global ranks (`_new_with_shape`); this mixin derives `slice`, `split`,
`rename`, `flatten`, `size`, `sizes`, `extent` and `len()` from them, with the arithmetic and
error messages in `monarch._src.shape.ops`. The shape comes as torchmonarch's abstract pair,
`_ndslice` and `_labels` (what a subclass written for torchmonarch implements), or as a `Shape`
in `_shape`, as this package's meshes keep it (`_ndslice` and `_labels` then derive from it).

Design note: the protocol is a mixin over one abstract pair rather than a `Protocol` the mesh
types each implement, because every implementation would be the same six lines and would drift.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TypeVar

from monarch._src.shape.extent import Extent
from monarch._src.shape.ops import flatten_shape, rename_shape, slice_shape, split_shape
from monarch._src.shape.shape import Shape
from monarch._src.shape.slice import NDSlice

# A bound TypeVar rather than `typing.Self`: Self needs Python 3.11 or typing_extensions, and this
# package imports only the standard library of Python 3.10.
_M = TypeVar("_M", bound="MeshTrait")


class MeshTrait(ABC):
    """Mixin giving a mesh the slice/split/rename/flatten/size protocol over its `_shape`."""

    __slots__ = ()

    @property
    def _ndslice(self) -> NDSlice:
        """The global ranks of this mesh (by default those of `_shape`)."""
        return self._trait_shape().ndslice

    @property
    def _labels(self) -> Sequence[str]:
        """The dimension names of this mesh (by default a tuple of those of `_shape`)."""
        return tuple(self._trait_shape().labels)

    def _trait_shape(self) -> Shape:
        """Labels and global ranks of this mesh: `_shape`, else built from `_ndslice` and
        `_labels` (a subclass must supply one or the other)."""
        shape = getattr(self, "_shape", None)
        if isinstance(shape, Shape):
            return shape
        if type(self)._ndslice is MeshTrait._ndslice or type(self)._labels is MeshTrait._labels:
            raise TypeError(
                f"{type(self).__name__} is a MeshTrait without a shape: give it a `_shape` "
                "(a Shape) or the `_ndslice` and `_labels` properties.")
        return Shape(list(self._labels), self._ndslice)

    @abstractmethod
    def _new_with_shape(self: _M, shape: Shape) -> _M:
        """A mesh of the same kind restricted or relabelled to `shape`.

        `shape` covers a subset of this mesh's global ranks (all of them for split, rename
        and flatten), so implementations can map each of its ranks back to their own data.
        """

    def slice(self: _M, **dims: int | builtins.slice) -> _M:
        """Restrict dimensions: `mesh.slice(gpus=0)` drops `gpus`; a `slice` keeps the dim.

        Unknown label: TypeError. Integer out of range or negative: IndexError.
        """
        return self._new_with_shape(slice_shape(self._trait_shape(), **dims))

    def split(self: _M, **kwargs: Sequence[str] | int) -> _M:
        """Split dimensions: `mesh.split(host=("dp", "pp"), pp=2)`; see `ops.split_shape`."""
        return self._new_with_shape(split_shape(self._trait_shape(), **kwargs))

    def rename(self: _M, **kwargs: str) -> _M:
        """Rename dimensions: `mesh.rename(host="dp")`; unmentioned dimensions are kept."""
        return self._new_with_shape(rename_shape(self._trait_shape(), **kwargs))

    def flatten(self: _M, name: str) -> _M:
        """Collapse all dimensions into one called `name`; ValueError on a sparse mesh."""
        return self._new_with_shape(flatten_shape(self._trait_shape(), name))

    def size(self, dim: str | Sequence[str] | None = None) -> int:
        """Total points, the size of dimension `dim`, or the product over several dims.

        An unknown dimension raises KeyError naming this mesh, as on Monarch.
        """
        extent = self.extent
        if dim is None:
            return extent.nelements
        if isinstance(dim, str):
            if dim not in extent.labels:
                raise KeyError(f"{self} does not have dimension {dim!r}")
            return extent[dim]
        total = 1
        for label in dim:
            total *= self.size(label)
        return total

    @property
    def sizes(self) -> dict[str, int]:
        """Label -> size, in dimension order."""
        extent = self.extent
        return dict(zip(extent.labels, extent.sizes))

    @property
    def extent(self) -> Extent:
        return self._trait_shape().extent

    def __len__(self) -> int:
        return len(self._trait_shape())
