"""`Extent` (named dimension sizes) and `Point` (one position inside an extent).

An extent says how big a mesh is, dimension by dimension, and nothing about which global ranks
it covers (that is the `Slice` in a `Shape`). A point is a row-major rank within an extent, read
as a mapping from label to coordinate, so `mesh.slice(**point)` selects it.

Both are immutable values that hash, compare and pickle. Unknown labels raise
`DimensionNotFound`, which is both a `KeyError` (so `in` and `Mapping.get` behave) and the
`ValueError` that Monarch raises.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from monarch._src.shape.region import Region
from monarch._src.shape.slice import NEGATIVE, Slice, rust_str

_BARE_LABEL = re.compile(r"[A-Za-z0-9_]+")


class DimensionNotFound(KeyError, ValueError):
    """A dimension label was looked up in an extent or point that does not have it."""

    def __init__(self, label: str) -> None:
        super().__init__(f"Dimension {label!r} not found")
        self.label = label

    def __str__(self) -> str:
        # KeyError would repr() the message; Monarch users match on the plain text.
        return str(self.args[0])

    def __reduce__(self) -> tuple[Any, ...]:
        return (DimensionNotFound, (self.label,))


def _format_label(label: str) -> str:
    return label if _BARE_LABEL.fullmatch(label) else rust_str(label)


class Extent(Mapping[str, int]):
    """Ordered mapping from dimension label to size, e.g. `{hosts: 2, gpus: 4}`."""

    __slots__ = ("_index", "_labels", "_sizes")

    def __init__(self, labels: Sequence[str], sizes: Sequence[int]) -> None:
        # The errors are Monarch's, whose Extent is a Rust value of unsigned sizes.
        if isinstance(labels, str):
            raise TypeError("argument 'labels': Can't extract `str` to `Vec`")
        labels_t = tuple(labels)
        for label in labels_t:
            if not isinstance(label, str):
                raise TypeError(f"Extent label {label!r} is not a string.")
        if len(set(labels_t)) != len(labels_t):
            raise ValueError(f"Extent labels {list(labels_t)} repeat a name; use distinct labels.")
        sizes_t = tuple(operator.index(size) for size in sizes)
        if len(sizes_t) != len(labels_t):
            raise ValueError(
                f"label/sizes dimension mismatch: {len(labels_t)} != {len(sizes_t)}"
            )
        if any(size < 0 for size in sizes_t):
            raise OverflowError(NEGATIVE)
        # _index: label -> dimension position, the inverse of _labels.
        self._labels: tuple[str, ...] = labels_t
        self._sizes: tuple[int, ...] = sizes_t
        self._index: dict[str, int] = {label: dim for dim, label in enumerate(labels_t)}

    @property
    def labels(self) -> list[str]:
        """The dimension names, outermost first."""
        return list(self._labels)

    @property
    def sizes(self) -> list[int]:
        """The size of each dimension, in the order of `labels`."""
        return list(self._sizes)

    @property
    def nelements(self) -> int:
        """Number of points: the product of the sizes (1 for a 0-dimensional extent)."""
        total = 1
        for size in self._sizes:
            total *= size
        return total

    @property
    def region(self) -> Region:
        """These dimensions laid densely over global ranks `0 .. nelements - 1`."""
        return Region(self._labels, Slice.new_row_major(self._sizes))

    def dim_index(self, label: str) -> int:
        """Position of `label` among the dimensions; `DimensionNotFound` if absent."""
        try:
            return self._index[label]
        except (KeyError, TypeError):
            raise DimensionNotFound(label) from None

    def __getitem__(self, label: str) -> int:
        return self._sizes[self.dim_index(label)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._labels)

    def __len__(self) -> int:
        return len(self._labels)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Extent):
            return NotImplemented
        return (self._labels, self._sizes) == (other._labels, other._sizes)

    def __hash__(self) -> int:
        return hash((Extent, self._labels, self._sizes))

    def __repr__(self) -> str:
        body = ", ".join(
            f"{_format_label(label)}: {size}" for label, size in zip(self._labels, self._sizes)
        )
        return "{" + body + "}"

    def _repr_html_(self) -> str:
        import html

        cells = "".join(
            f"<td style='border:1px solid #999;padding:2px 6px'>{html.escape(label)}: {size}</td>"
            for label, size in zip(self.labels, self.sizes)
        )
        return f"<table style='border-collapse:collapse'><tr>{cells}</tr></table>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Extent, (self._labels, self._sizes))


class Point(Mapping[str, int]):
    """Read-only mapping label -> coordinate of row-major `rank` within `extent`."""

    __slots__ = ("_coords", "_extent", "_rank")

    def __init__(self, rank: int, extent: Extent) -> None:
        if not isinstance(extent, Extent):
            raise TypeError(
                f"argument 'extent': '{type(extent).__name__}' object cannot be cast as 'Extent'"
            )
        try:
            rank = operator.index(rank)
        except TypeError:
            raise TypeError(
                f"argument 'rank': '{type(rank).__name__}' object cannot be interpreted as an "
                "integer"
            ) from None
        if rank < 0:
            raise OverflowError(NEGATIVE)
        if rank >= extent.nelements:
            raise ValueError(
                f"out of range: total ranks {extent.nelements}; does not contain rank {rank}"
            )
        coords = [0] * len(extent)
        remainder = rank
        sizes = extent.sizes
        for dim in range(len(sizes) - 1, -1, -1):
            remainder, coords[dim] = divmod(remainder, sizes[dim])
        # _coords: coordinate per dimension of _extent, derived once from _rank.
        self._rank: int = rank
        self._extent: Extent = extent
        self._coords: tuple[int, ...] = tuple(coords)

    @property
    def rank(self) -> int:
        """The point's row-major index in its extent."""
        return self._rank

    @property
    def extent(self) -> Extent:
        """The extent this point lies in."""
        return self._extent

    def size(self, label: str) -> int:
        """Size of dimension `label` in this point's extent."""
        return self._extent[label]

    def __getitem__(self, label: str) -> int:
        return self._coords[self._extent.dim_index(label)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._extent)

    def __len__(self) -> int:
        return len(self._coords)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Point):
            return NotImplemented
        return (self._rank, self._extent) == (other._rank, other._extent)

    def __hash__(self) -> int:
        return hash((Point, self._rank, self._extent))

    def __repr__(self) -> str:
        body = ", ".join(
            f"{label!r}: {coord}/{size}"
            for label, coord, size in zip(self._extent, self._coords, self._extent.sizes)
        )
        return "{" + body + "}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Point, (self._rank, self._extent))
