"""`Slice` (a.k.a. `NDSlice`): a strided set of global ranks.

A slice is `offset + sum(coord[d] * strides[d])` over every coordinate vector inside `sizes`,
enumerated in row-major order. Meshes keep one of these so that slicing a mesh never renumbers
processes: a slice of a slice still names the original global ranks.

Design note: a slice is an immutable value (tuples inside, fresh lists handed out) so it can be
hashed, shared between meshes and pickled without defensive copies. The alternative, storing the
explicit list of ranks, was rejected because a mesh of a million ranks would carry a million-int
list through every message that names it.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator, Sequence
from typing import Any, SupportsIndex, overload

# Monarch's slices are Rust values of unsigned integers: a negative offset, size, stride,
# position or coordinate is refused at that boundary with this OverflowError, and user code
# written for Monarch may catch exactly that.
NEGATIVE = "can't convert negative int to unsigned"


def _as_nonneg_int(value: object, what: str) -> int:
    """Convert `value` to an int, rejecting negatives and non-integers as Monarch does."""
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError as exc:
        raise TypeError(f"Slice {what} must be an integer, got {value!r}.") from exc
    if number < 0:
        raise OverflowError(NEGATIVE)
    return number


def _check_layout(sizes: Sequence[int], strides: Sequence[int]) -> None:
    """Refuse strides that are not a nesting of dimensions, with Monarch's errors.

    Taken from the finest stride up, each stride must be a multiple of the previous one and at
    least the span the finer dimensions cover; two dimensions may share a stride only when one
    of them has size 1. Then every rank appears once and coordinates follow by divmod.
    """
    previous: tuple[int, int] | None = None
    span = 1
    for stride, size in sorted(zip(strides, sizes)):
        if previous is not None:
            previous_stride, previous_size = previous
            if stride % previous_stride:
                raise ValueError("nonrectangular shape")
            if stride == previous_stride and size != 1 and previous_size != 1:
                raise ValueError("nonunique strides")
        if span > stride:
            raise ValueError(f"stride {stride} must be larger than size of previous space {span}")
        span = stride * size
        previous = (stride, size)


def rust_str(text: str) -> str:
    """`text` as Rust's Debug prints a string (double quotes), the form Monarch's reprs use."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return f'"{escaped}"'


def row_major_strides(sizes: Sequence[int]) -> list[int]:
    """Strides that lay `sizes` out densely in row-major (last dimension fastest) order."""
    strides = [1] * len(sizes)
    for dim in range(len(sizes) - 2, -1, -1):
        strides[dim] = strides[dim + 1] * sizes[dim + 1]
    return strides


class Slice:
    """An n-dimensional strided slice of global ranks; immutable, hashable and picklable."""

    __slots__ = ("_len", "_offset", "_sizes", "_strides")

    def __init__(self, *, offset: int, sizes: Sequence[int], strides: Sequence[int]) -> None:
        if isinstance(sizes, (str, bytes)) or isinstance(strides, (str, bytes)):
            raise TypeError("Slice sizes and strides must be sequences of integers.")
        sizes_t = tuple(_as_nonneg_int(s, "size") for s in sizes)
        strides_t = tuple(_as_nonneg_int(s, "stride") for s in strides)
        if len(sizes_t) != len(strides_t):
            raise ValueError(f"invalid dims: expected {len(sizes_t)}, got {len(strides_t)}")
        _check_layout(sizes_t, strides_t)
        # _offset: global rank of coordinate (0, ..., 0); _len: cached product of _sizes.
        self._offset: int = _as_nonneg_int(offset, "offset")
        self._sizes: tuple[int, ...] = sizes_t
        self._strides: tuple[int, ...] = strides_t
        length = 1
        for size in sizes_t:
            length *= size
        self._len: int = length

    # -- constructors -------------------------------------------------------------------------

    @classmethod
    def new_row_major(cls, sizes: Sequence[int]) -> Slice:
        """The dense slice `0 .. prod(sizes)-1` with row-major strides."""
        sizes_l = [_as_nonneg_int(s, "size") for s in sizes]
        # Built without the layout check, as Monarch builds it: a zero-size dimension makes the
        # strides of the outer ones 0, which the check would refuse.
        return _rebuild_slice(0, tuple(sizes_l), tuple(row_major_strides(sizes_l)))

    @classmethod
    def from_list(cls, ranks: Sequence[int]) -> list[Slice]:
        """One-dimensional slices that together cover `ranks`, as Monarch decomposes them.

        The ranks are sorted, then cut greedily into maximal arithmetic runs with a positive
        step: `[0, 2, 4, 5, 6]` gives `[0, 2, 4]` (stride 2) and `[5, 6]`. A repeated rank
        starts a new run, and an empty list gives an empty list.
        """
        seq = sorted(_as_nonneg_int(r, "rank") for r in ranks)
        slices: list[Slice] = []
        start = 0
        while start < len(seq):
            first = seq[start]
            end = start + 1
            stride = seq[end] - first if end < len(seq) else 0
            if stride > 0:
                while end < len(seq) and seq[end] - seq[end - 1] == stride:
                    end += 1
            slices.append(cls(offset=first, sizes=[end - start], strides=[max(stride, 1)]))
            start = end
        return slices

    # -- accessors ----------------------------------------------------------------------------

    @property
    def offset(self) -> int:
        """The flat index of the slice's first element."""
        return self._offset

    @property
    def sizes(self) -> list[int]:
        """The size of each dimension."""
        return list(self._sizes)

    @property
    def strides(self) -> list[int]:
        """The flat-index step of each dimension."""
        return list(self._strides)

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._sizes)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[int]:
        offset, strides = self._offset, self._strides
        for coords in itertools.product(*(range(size) for size in self._sizes)):
            yield offset + sum(c * s for c, s in zip(coords, strides))

    @overload
    def __getitem__(self, index: SupportsIndex) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[int, ...]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> int | tuple[int, ...]:
        """The global rank at row-major position `index` (0 .. len - 1: as on Monarch a negative
        position is a TypeError, positions being unsigned).

        A Python slice of positions gives the tuple of their ranks (negative bounds allowed), as
        on Monarch.
        """
        if isinstance(index, slice):
            return tuple(self.get(i) for i in range(*index.indices(self._len)))
        if operator.index(index) < 0:
            raise TypeError(
                f"Slice position {operator.index(index)} is negative: positions are unsigned "
                f"(0 to {self._len - 1}); use s[len(s) - 1] for the last rank."
            )
        return self.get(index)

    def get(self, index: SupportsIndex) -> int:
        """The global rank at row-major position `index` (negative counts from the end)."""
        position = operator.index(index)
        if position < 0:
            position += self._len
        if not 0 <= position < self._len:
            raise IndexError(f"index {operator.index(index)} out of range {self._len}")
        rank = self._offset
        for size, stride in zip(reversed(self._sizes), reversed(self._strides)):
            position, coord = divmod(position, size)
            rank += coord * stride
        return rank

    def nditem(self, coords: Sequence[int]) -> int:
        """`offset + sum(coords[d] * strides[d])`: the rank at coordinate vector `coords`.

        As on Monarch, only the number of coordinates is checked (IndexError), not whether each
        lies inside its dimension; callers that need that check use `coordinates` on the result.
        """
        coords_l = [_as_nonneg_int(c, "coordinate") for c in coords]
        if len(coords_l) != len(self._sizes):
            raise IndexError(f"invalid dims: expected {len(self._sizes)}, got {len(coords_l)}")
        return self._offset + sum(c * s for c, s in zip(coords_l, self._strides))

    def coordinates(self, value: int) -> list[int]:
        """The coordinate vector of global rank `value`; ValueError if it is not in the slice."""
        rank = operator.index(value)
        coords = self._coordinates_or_none(rank)
        if coords is None:
            raise ValueError(f"value {rank} not in slice")
        return coords

    def index(self, value: int) -> int:
        """The row-major position of global rank `value`; ValueError if it is not in the slice."""
        position = 0
        for coord, size in zip(self.coordinates(value), self._sizes):
            position = position * size + coord
        return position

    def __contains__(self, value: object) -> bool:
        try:
            self.coordinates(operator.index(value))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        return True

    def _coordinates_or_none(self, rank: int) -> list[int] | None:
        """Coordinates of `rank` by divmod, coarsest stride first; None if it is not here.

        Exact because `_check_layout` guarantees the dimensions nest.
        """
        remainder = rank - self._offset
        if self._len == 0 or remainder < 0:
            return None
        coords = [0] * len(self._sizes)
        order = sorted(range(len(self._sizes)), key=lambda d: self._strides[d], reverse=True)
        for dim in order:
            if self._sizes[dim] <= 1:
                continue
            coord, remainder = divmod(remainder, self._strides[dim])
            if coord >= self._sizes[dim]:
                return None
            coords[dim] = coord
        return coords if remainder == 0 else None

    def is_contiguous(self) -> bool:
        """True if the ranks are the dense row-major range `offset .. offset + len - 1`.

        The stride of a dimension of size 1 never matters, so it is ignored.
        """
        if self._len == 0:
            return True
        expected = row_major_strides(self._sizes)
        return all(
            size == 1 or stride == want
            for size, stride, want in zip(self._sizes, self._strides, expected)
        )

    # -- value semantics ----------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Slice):
            return NotImplemented
        return (self._offset, self._sizes, self._strides) == (
            other._offset,
            other._sizes,
            other._strides,
        )

    def __hash__(self) -> int:
        return hash((Slice, self._offset, self._sizes, self._strides))

    def __repr__(self) -> str:
        # Monarch's Rust Debug form, which is also its str.
        return (
            f"Slice {{ offset: {self._offset}, sizes: {list(self._sizes)}, "
            f"strides: {list(self._strides)} }}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_slice, (self._offset, self._sizes, self._strides))


def _rebuild_slice(offset: int, sizes: tuple[int, ...], strides: tuple[int, ...]) -> Slice:
    """A slice from fields already known to be valid (unpickling, `new_row_major`)."""
    built = Slice.__new__(Slice)
    built._offset, built._sizes, built._strides = offset, tuple(sizes), tuple(strides)
    length = 1
    for size in built._sizes:
        length *= size
    built._len = length
    return built


NDSlice = Slice
