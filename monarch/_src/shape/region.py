"""`Region`: labelled dimensions over a `Slice` of global ranks, as a plain value.

`Extent.region` and `Shape.region` return one. It carries the same information as a `Shape`
but none of the slicing operations; it exists so code can compare and hash "which ranks, under
which names" without caring which mesh type produced them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from monarch._src.shape.slice import Slice

if TYPE_CHECKING:
    from monarch._src.shape.extent import Point
    from monarch._src.shape.shape import Shape


class Region:
    """Named dimensions (`labels`) laid over a strided `slice` of global ranks; immutable."""

    __slots__ = ("_labels", "_slice")

    def __init__(self, labels: Sequence[str], slice: Slice) -> None:
        labels_t = tuple(labels)
        if isinstance(labels, str) or not all(isinstance(label, str) for label in labels_t):
            raise TypeError(f"Region labels must be a sequence of strings, got {labels!r}.")
        if len(labels_t) != len(slice.sizes):
            raise ValueError(
                f"Region got {len(labels_t)} labels for a {len(slice.sizes)}-dimensional "
                f"{slice!r}; pass one label per dimension."
            )
        if len(set(labels_t)) != len(labels_t):
            raise ValueError(
                f"Region labels {list(labels_t)} repeat a name; labels must be distinct."
            )
        # _labels: one distinct name per dimension of _slice, outermost first.
        self._labels: tuple[str, ...] = labels_t
        self._slice: Slice = slice

    @property
    def labels(self) -> list[str]:
        return list(self._labels)

    def slice(self) -> Slice:
        """The strided slice of global ranks (a method, as on Monarch)."""
        return self._slice

    def as_shape(self) -> Shape:
        """The same labels and ranks as a `Shape`, which has the slicing operations."""
        from monarch._src.shape.shape import Shape

        return Shape(self._labels, self._slice)

    def point_of_base_rank(self, rank: int) -> Point:
        """The `Point` (position within this region) of global rank `rank`."""
        from monarch._src.shape.extent import Extent, Point

        try:
            position = self._slice.index(rank)
        except ValueError:
            raise ValueError(
                f"out of range base rank: this base rank {rank} does not belong to this region: "
                f"{rank}"
            ) from None
        return Point(position, Extent(self._labels, self._slice.sizes))

    @property
    def sizes(self) -> list[int]:
        return self._slice.sizes

    def ranks(self) -> list[int]:
        """Global ranks in row-major order."""
        return list(self._slice)

    def __len__(self) -> int:
        return len(self._slice)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Region):
            return NotImplemented
        return (self._labels, self._slice) == (other._labels, other._slice)

    def __hash__(self) -> int:
        return hash((Region, self._labels, self._slice))

    def __repr__(self) -> str:
        # Monarch's Region is a Rust object with the default repr under its binding's path.
        return f"<monarch._rust_bindings.monarch_hyperactor.shape.Region object at {id(self):#x}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Region, (self._labels, self._slice))
