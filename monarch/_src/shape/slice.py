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
from typing import Any, SupportsIndex


def _as_nonneg_int(value: object, what: str) -> int:
    """Convert `value` to an int, rejecting negatives and non-integers with a clear error."""
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError as exc:
        raise TypeError(f"Slice {what} must be an integer, got {value!r}.") from exc
    if number < 0:
        raise ValueError(f"Slice {what} must be non-negative, got {number}.")
    return number


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
            raise ValueError(
                f"Slice got {len(sizes_t)} sizes but {len(strides_t)} strides; "
                "pass one stride per dimension."
            )
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
        return cls(offset=0, sizes=sizes_l, strides=row_major_strides(sizes_l))

    @classmethod
    def from_list(cls, ranks: Sequence[int]) -> Slice:
        """The slice whose row-major iteration yields exactly `ranks`, in the given order.

        The result is normalized: it has no dimension of size 1 and no two adjacent dimensions
        that could be merged into one (a single rank gives `sizes=[1]`).
        Raises ValueError if `ranks` is empty, repeats a rank, or is not one strided slice.
        """
        seq = [_as_nonneg_int(r, "rank") for r in ranks]
        if not seq:
            raise ValueError("Cannot build a Slice from an empty list of ranks; pass at least one.")
        if len(set(seq)) != len(seq):
            raise ValueError(f"Cannot build a Slice from ranks {seq}: a rank appears twice.")
        if len(seq) == 1:
            return cls(offset=seq[0], sizes=[1], strides=[1])
        # Peel dimensions from the innermost outwards: the longest arithmetic run at the start
        # is the innermost (merged) dimension; every block of that length must repeat the run,
        # and the blocks' first ranks form the next, outer, sequence.
        inner_first: list[tuple[int, int]] = []
        current = seq
        while len(current) > 1:
            stride = current[1] - current[0]
            if stride <= 0:
                raise ValueError(
                    f"Cannot build a Slice from ranks {seq}: they do not increase along a "
                    "strided dimension; sort them or build the Slice explicitly."
                )
            run = 2
            while run < len(current) and current[run] - current[run - 1] == stride:
                run += 1
            if len(current) % run != 0:
                raise ValueError(f"Cannot build a Slice from ranks {seq}: they are not strided.")
            starts = current[::run]
            for block, start in enumerate(starts):
                expected = range(start, start + run * stride, stride)
                if current[block * run : (block + 1) * run] != list(expected):
                    raise ValueError(
                        f"Cannot build a Slice from ranks {seq}: they are not strided."
                    )
            inner_first.append((run, stride))
            current = starts
        inner_first.reverse()
        return cls(
            offset=seq[0],
            sizes=[size for size, _ in inner_first],
            strides=[stride for _, stride in inner_first],
        )

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

    def __getitem__(self, index: SupportsIndex) -> int:
        """The global rank at row-major position `index` (negative counts from the end)."""
        position = operator.index(index)
        if position < 0:
            position += self._len
        if not 0 <= position < self._len:
            raise IndexError(
                f"Position {operator.index(index)} is out of range for {self!r} "
                f"of length {self._len}."
            )
        rank = self._offset
        for size, stride in zip(reversed(self._sizes), reversed(self._strides)):
            position, coord = divmod(position, size)
            rank += coord * stride
        return rank

    def nditem(self, coords: Sequence[int]) -> int:
        """The global rank at coordinate vector `coords`; ValueError if outside the slice."""
        coords_l = [operator.index(c) for c in coords]
        if len(coords_l) != len(self._sizes):
            raise ValueError(
                f"{self!r} has {len(self._sizes)} dimensions but got coordinates {coords_l}; "
                "pass one coordinate per dimension."
            )
        rank = self._offset
        for dim, (coord, size, stride) in enumerate(zip(coords_l, self._sizes, self._strides)):
            if not 0 <= coord < size:
                raise ValueError(
                    f"Coordinate {coord} of dimension {dim} is out of range for {self!r}; "
                    f"it must be in [0, {size})."
                )
            rank += coord * stride
        return rank

    def coordinates(self, value: int) -> list[int]:
        """The coordinate vector of global rank `value`; ValueError if it is not in the slice."""
        rank = operator.index(value)
        coords = self._fast_coordinates(rank)
        if coords is None:
            coords = self._scan_coordinates(rank)
        if coords is None:
            raise ValueError(f"Rank {rank} is not in {self!r}.")
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

    def _is_nested(self) -> bool:
        """True if, by decreasing stride, each stride exceeds the span of all finer dimensions.

        Then coordinates follow from repeated divmod and every rank appears once.
        """
        span = 1
        for size, stride in sorted(
            ((sz, st) for sz, st in zip(self._sizes, self._strides) if sz > 1),
            key=lambda pair: pair[1],
        ):
            if stride < span:
                return False
            span = stride * (size - 1) + span
        return True

    def _fast_coordinates(self, rank: int) -> list[int] | None:
        """Coordinates by divmod when the slice is nested; None if absent or not nested."""
        if self._len == 0 or not self._is_nested():
            return None
        remainder = rank - self._offset
        if remainder < 0:
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

    def _scan_coordinates(self, rank: int) -> list[int] | None:
        """Linear search, for hand-built slices whose dimensions interleave."""
        if self._is_nested():
            return None  # the divmod path is exact for nested slices
        strides = self._strides
        for coords in itertools.product(*(range(size) for size in self._sizes)):
            if self._offset + sum(c * s for c, s in zip(coords, strides)) == rank:
                return list(coords)
        return None

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
        return (
            f"Slice(offset={self._offset}, sizes={list(self._sizes)}, "
            f"strides={list(self._strides)})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_slice, (self._offset, self._sizes, self._strides))


def _rebuild_slice(offset: int, sizes: tuple[int, ...], strides: tuple[int, ...]) -> Slice:
    """Unpickling hook; module-level because the constructor is keyword-only."""
    return Slice(offset=offset, sizes=sizes, strides=strides)


NDSlice = Slice
