"""`Shape`: named dimensions over a strided `Slice` of global ranks.

A shape is what every mesh holds: the labels say how users address dimensions, the slice says
which global ranks (processes, actors) sit at each coordinate. `at` and `select` are the two
primitive restrictions (drop a dimension at an index; keep it but narrow it); the mesh protocol
in `ops.py` is built from them and adds the error types Monarch's `MeshTrait` raises.

`Shape.at` raises ValueError for a bad label or index and OverflowError for a negative index,
because that is what Monarch's Rust binding raises and user code may catch it.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from monarch._src.shape.extent import Extent
from monarch._src.shape.region import Region
from monarch._src.shape.slice import NEGATIVE, Slice, rust_str


class Shape:
    """Labelled dimensions (`labels`) over a `Slice` of global ranks (`ndslice`); immutable."""

    __slots__ = ("_labels", "_slice")

    def __init__(self, labels: Sequence[str], slice: Slice) -> None:
        if isinstance(labels, str):
            raise TypeError(
                f"Shape labels must be a sequence of strings, got the string {labels!r}; "
                f"wrap it in a list, e.g. [{labels!r}]."
            )
        if not isinstance(slice, Slice):
            raise TypeError(f"Shape needs a Slice, got {slice!r}.")
        labels_t = tuple(labels)
        for label in labels_t:
            if not isinstance(label, str):
                raise TypeError(f"Shape label {label!r} is not a string.")
        if len(set(labels_t)) != len(labels_t):
            raise ValueError(f"Shape labels {list(labels_t)} repeat a name; use distinct labels.")
        if len(labels_t) != slice.ndim:
            raise ValueError(f"label slice dimension mismatch: {len(labels_t)} != {slice.ndim}")
        # _labels[d] names dimension d of _slice.
        self._labels: tuple[str, ...] = labels_t
        self._slice: Slice = slice

    @staticmethod
    def unity() -> Shape:
        """The 0-dimensional shape holding the single global rank 0."""
        return Shape([], Slice(offset=0, sizes=[], strides=[]))

    @property
    def labels(self) -> list[str]:
        """The dimension names, outermost first."""
        return list(self._labels)

    @property
    def ndslice(self) -> Slice:
        """The strided slice of global ranks this shape covers."""
        return self._slice

    @property
    def extent(self) -> Extent:
        """Labels and sizes, without the ranks."""
        return Extent(self._labels, self._slice.sizes)

    @property
    def region(self) -> Region:
        """Labels and the slice of ranks, as a `Region`."""
        return Region(self._labels, self._slice)

    def ranks(self) -> list[int]:
        """Global ranks in row-major order."""
        return list(self._slice)

    def coordinates(self, rank: int) -> dict[str, int]:
        """Label -> coordinate of global `rank`; ValueError if the shape does not cover it."""
        return dict(zip(self._labels, self._slice.coordinates(rank)))

    def dim_index(self, label: str) -> int:
        """Position of dimension `label`; ValueError (Monarch's text) if absent."""
        try:
            return self._labels.index(label)
        except ValueError:
            raise ValueError(f"invalid labels `[{rust_str(label)}]`") from None

    def at(self, label: str, index: int) -> Shape:
        """The shape with dimension `label` fixed at `index` and removed."""
        dim = self.dim_index(label)
        try:
            position = operator.index(index)
        except TypeError:
            raise TypeError(
                f"argument 'index': '{type(index).__name__}' object cannot be interpreted as an "
                "integer"
            ) from None
        size = self._slice.sizes[dim]
        if position < 0:
            raise OverflowError(NEGATIVE)
        if position >= size:
            raise ValueError(
                f"out of range {position}:{position + 1}:1 for dimension {label} of size {size}"
            )
        sizes, strides = self._slice.sizes, self._slice.strides
        offset = self._slice.offset + position * strides[dim]
        del sizes[dim], strides[dim]
        labels = list(self._labels)
        del labels[dim]
        return Shape(labels, Slice(offset=offset, sizes=sizes, strides=strides))

    def select(self, label: str, slice_obj: slice) -> Shape:
        """The shape with dimension `label` kept but narrowed to `slice_obj` (clamped, step > 0).

        The errors are Monarch's: a zero step, a negative step ("nonrectangular shape") and an
        empty range are ValueErrors.
        """
        dim = self.dim_index(label)
        if not isinstance(slice_obj, slice):
            raise TypeError(
                f"argument 'slice': '{type(slice_obj).__name__}' object cannot be cast as 'slice'"
            )
        size = self._slice.sizes[dim]
        start, stop, step = slice_obj.indices(size)
        if step < 0:
            raise ValueError("nonrectangular shape")
        new_size = len(range(start, stop, step))
        if new_size == 0:
            raise ValueError(f"empty range {start}:{stop}:{step}")
        sizes, strides = self._slice.sizes, self._slice.strides
        offset = self._slice.offset + start * strides[dim]
        sizes[dim] = new_size
        strides[dim] = strides[dim] * step
        return Shape(self._labels, Slice(offset=offset, sizes=sizes, strides=strides))

    def index(self, **kwargs: int | slice) -> Shape:
        """Apply `at` for each integer and `select` for each slice, e.g. `index(gpus=0)`."""
        shape = self
        for label, selector in kwargs.items():
            if isinstance(selector, slice):
                shape = shape.select(label, selector)
            else:
                shape = shape.at(label, selector)
        return shape

    def __len__(self) -> int:
        return len(self._slice)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Shape):
            return NotImplemented
        return (self._labels, self._slice) == (other._labels, other._slice)

    def __hash__(self) -> int:
        return hash((Shape, self._labels, self._slice))

    def __repr__(self) -> str:
        # Monarch's Rust Debug form; str() is the short `{a=2,b=3}`.
        labels = ", ".join(rust_str(label) for label in self._labels)
        return f"Shape {{ labels: [{labels}], slice: {self._slice!r} }}"

    def __str__(self) -> str:
        sizes = self._slice.sizes
        return "{" + ",".join(f"{label}={size}" for label, size in zip(self._labels, sizes)) + "}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Shape, (self._labels, self._slice))
