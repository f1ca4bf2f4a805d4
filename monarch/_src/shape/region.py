"""`Region`: labelled dimensions over a `Slice` of global ranks, as a plain value.

`Extent.region` and `Shape.region` return one. It carries the same information as a `Shape`
but none of the slicing operations; it exists so code can compare and hash "which ranks, under
which names" without caring which mesh type produced them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from monarch._src.shape.slice import Slice


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

    @property
    def slice(self) -> Slice:
        return self._slice

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
        return f"Region(labels={list(self._labels)}, slice={self._slice!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Region, (self._labels, self._slice))
